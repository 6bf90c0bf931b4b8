"""/api/runs without a worker: starting, listing, reading, and every refusal."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from runs import services
from runs.actor import Actor
from runs.models import Gate, Iteration, NodeRun, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def guided(bundled):
    return bundled["guided-refine"]


@pytest.fixture
def run(guided, operator):
    return services.start_run(guided, actor=Actor.operator(operator, "console"), message="a haiku")


def decided_gate(run, user, status=Gate.Status.ITERATED):
    node = NodeRun.objects.create(run=run, node_id="refine", kind="loop", iteration_count=1)
    it = Iteration.objects.create(run=run, node_run=node, node_id="refine", number=1)
    return Gate.objects.create(
        run=run,
        node_run=node,
        iteration=it,
        node_id="refine",
        kind=Gate.Kind.LOOP,
        message="The agent said DONE.",
        completion_signaled=True,
        status=status,
        decided_by=user,
        decided_at=timezone.now(),
        surface="console",
    )


# --- starting ------------------------------------------------------------------------------


def test_operator_starts_a_run(as_operator, guided, operator):
    response = as_operator.post(
        "/api/runs",
        {"recipe": "guided-refine", "message": "hello", "inputs": {"tone": "formal"}},
    )
    assert response.status_code == 201
    assert set(response.body) == {"id", "status", "url"}
    run = Run.objects.get(pk=response.body["id"])
    assert run.started_by == operator and run.inputs["tone"] == "formal"
    assert response.body["url"].endswith(f"/runs/{run.pk}/")
    assert run.events.get(kind="run_created").data["by"] == "otto"


def test_start_without_body_fields_is_422(as_operator, guided):
    assert as_operator.post("/api/runs", {}).status_code == 422


def test_start_with_bad_inputs_is_422_naming_the_input(as_operator, guided):
    response = as_operator.post(
        "/api/runs",
        {"recipe": "guided-refine", "message": "m", "inputs": {"tone": "rude", "extra": 1}},
    )
    assert response.status_code == 422
    assert set(response.body["errors"]) == {"tone", "extra"}


# The console's words for a run with nothing to work on (runs/services.py: start_run).
MESSAGE_NEEDED = "This recipe works on the message: write what the run is about."


@pytest.mark.parametrize("body", [{}, {"message": ""}, {"message": "  \n "}])
@pytest.mark.parametrize("slug", ["guided-refine", "launch-note"])  # $USER_MESSAGE; driven
def test_start_without_the_message_the_recipe_works_on_is_422(as_operator, bundled, slug, body):
    response = as_operator.post("/api/runs", {"recipe": slug, **body})
    assert response.status_code == 422
    assert response.body["errors"] == {"message": MESSAGE_NEEDED}
    assert not Run.objects.exists()


def test_a_message_over_the_limit_is_refused_in_the_consoles_words(as_operator, bundled):
    response = as_operator.post("/api/runs", {"recipe": "guided-refine", "message": "x" * 100_001})
    assert response.status_code == 422 and not Run.objects.exists()
    assert response.body["errors"] == {
        "message": "The message is 100,001 characters; the limit is 100,000."
    }


def test_start_without_a_message_when_the_recipe_does_not_use_it(as_operator, bundled):
    response = as_operator.post("/api/runs", {"recipe": "release-approval"})
    assert response.status_code == 201


@pytest.mark.parametrize(
    "budget",
    [{"iterations": "\u0663"}, {"tokens": "1\u0660\u0660"}, {"cost_usd": "\u0661.5"}],
    ids=["arabic-indic", "mixed", "cost"],
)
def test_a_budget_in_other_digits_than_0_to_9_is_422(as_operator, guided, budget):
    response = as_operator.post(
        "/api/runs", {"recipe": "guided-refine", "message": "m", "budget": budget}
    )
    assert response.status_code == 422 and not Run.objects.exists()
    [(key, text)] = response.body["errors"].items()
    assert key == "budget." + next(iter(budget)) and "the digits 0-9" in text


def test_start_unknown_recipe_is_404(as_operator, db):
    assert as_operator.post("/api/runs", {"recipe": "nope"}).status_code == 404


def test_start_disabled_recipe_is_409(as_operator, guided):
    guided.enabled = False
    guided.save()
    response = as_operator.post("/api/runs", {"recipe": "guided-refine"})
    assert response.status_code == 409 and "disabled" in response.body["detail"]


def test_malformed_json_is_400(as_operator, guided):
    response = as_operator.post("/api/runs", raw='{"recipe": ')
    assert response.status_code == 400 and response.body["detail"]


@pytest.mark.parametrize("persona", ["as_viewer", "as_outsider"])
def test_only_operators_start(request, persona, guided):
    client = request.getfixturevalue(persona)
    assert client.post("/api/runs", {"recipe": "guided-refine"}).status_code == 403
    assert not Run.objects.exists()


def test_no_credentials_and_bad_token_are_401(anonymous, guided):
    from tests.api.conftest import ApiClient

    assert anonymous.post("/api/runs", {"recipe": "guided-refine"}).status_code == 401
    assert ApiClient("lc_not-a-token").get("/api/runs").status_code == 401


# --- reading -------------------------------------------------------------------------------


def test_list_with_filters_and_cursor(as_viewer, guided, bundled, operator):
    operator_actor = Actor.operator(operator, "console")
    runs = [services.start_run(guided, actor=operator_actor, message="m") for _ in range(5)]
    other = services.start_run(bundled["counter-loop"], actor=operator_actor, message="m")
    services.cancel_run(runs[0], Actor.operator(operator, "console"))

    first = as_viewer.get("/api/runs", limit=2)
    assert [r["id"] for r in first.body["items"]] == [other.pk, runs[4].pk]
    second = as_viewer.get("/api/runs", limit=2, cursor=first.body["next_cursor"])
    assert [r["id"] for r in second.body["items"]] == [runs[3].pk, runs[2].pk]
    last = as_viewer.get("/api/runs", limit=2, cursor=second.body["next_cursor"])
    assert [r["id"] for r in last.body["items"]] == [runs[1].pk, runs[0].pk]
    assert last.body["next_cursor"] is None

    by_recipe = as_viewer.get("/api/runs", recipe="counter-loop")
    assert [r["id"] for r in by_recipe.body["items"]] == [other.pk]
    by_status = as_viewer.get("/api/runs", status="cancelled")
    assert [r["id"] for r in by_status.body["items"]] == [runs[0].pk]
    assert as_viewer.get("/api/runs", status="sleeping").status_code == 422


def test_run_detail(as_viewer, run):
    response = as_viewer.get(f"/api/runs/{run.pk}")
    assert response.status_code == 200
    body = response.body
    assert (body["id"], body["recipe"], body["status"]) == (run.pk, "guided-refine", "pending")
    assert body["pending_gate"] is None and body["nodes"] == []


def test_run_detail_shows_the_pending_gate(as_viewer, run, operator):
    gate = decided_gate(run, None, status=Gate.Status.PENDING)
    body = as_viewer.get(f"/api/runs/{run.pk}").body
    assert body["pending_gate"]["id"] == gate.pk
    assert {"id", "node", "iteration", "kind", "message", "completion_signaled", "status"} <= set(
        body["pending_gate"]
    )
    assert body["nodes"][0]["node"] == "refine" and body["nodes"][0]["iterations"] == 1


def test_unknown_run_is_404(as_viewer, db):
    assert as_viewer.get("/api/runs/999999").status_code == 404
    assert as_viewer.get("/api/runs/999999/iterations").status_code == 404
    assert as_viewer.get("/api/runs/999999/events").status_code == 404


def test_outsider_may_not_read_runs(as_outsider, run):
    assert as_outsider.get("/api/runs").status_code == 403
    assert as_outsider.get(f"/api/runs/{run.pk}").status_code == 403


def test_iterations_filter_and_paginate(as_viewer, run):
    node = NodeRun.objects.create(run=run, node_id="refine", kind="loop")
    other = NodeRun.objects.create(run=run, node_id="other", kind="loop")
    for n in range(1, 4):
        Iteration.objects.create(run=run, node_run=node, node_id="refine", number=n, prompt=f"p{n}")
    Iteration.objects.create(run=run, node_run=other, node_id="other", number=1)

    page = as_viewer.get(f"/api/runs/{run.pk}/iterations", node="refine", limit=2)
    assert [i["number"] for i in page.body["items"]] == [1, 2]
    assert page.body["items"][0]["prompt"] == "p1"
    rest = as_viewer.get(
        f"/api/runs/{run.pk}/iterations", node="refine", cursor=page.body["next_cursor"]
    )
    assert [i["number"] for i in rest.body["items"]] == [3]
    assert rest.body["next_cursor"] is None
    everything = as_viewer.get(f"/api/runs/{run.pk}/iterations")
    assert len(everything.body["items"]) == 4


def test_events_after(as_viewer, run, operator):
    services.cancel_run(run, Actor.operator(operator, "console"))
    events = as_viewer.get(f"/api/runs/{run.pk}/events").body
    kinds = [e["kind"] for e in events["items"]]
    assert kinds == ["run_created", "run_cancelled"]
    later = as_viewer.get(f"/api/runs/{run.pk}/events", after=1).body
    assert [e["seq"] for e in later["items"]] == [2]
    assert later["next_after"] == 2 and later["run_status"] == "cancelled"
    assert as_viewer.get(f"/api/runs/{run.pk}/events", after=-1).status_code == 422


# --- deciding, cancelling, resuming --------------------------------------------------------


def test_approve_with_nothing_waiting_is_409(as_operator, run):
    response = as_operator.post(f"/api/runs/{run.pk}/approve")
    assert response.status_code == 409 and "no gate waiting" in response.body["detail"]


def test_approve_a_decided_gate_is_409_naming_who_and_when(as_operator, run, editor):
    gate = decided_gate(run, editor)
    response = as_operator.post(f"/api/runs/{run.pk}/approve", {"comment": "more"})
    assert response.status_code == 409
    assert "already decided by edie at" in response.body["detail"]
    assert gate.decided_at.strftime("%Y-%m-%d") in response.body["detail"]
    rejected = as_operator.post(f"/api/runs/{run.pk}/reject", {"gate": gate.pk})
    assert rejected.status_code == 409 and "edie" in rejected.body["detail"]


def test_reject_needs_a_reason_as_the_console_asks(as_operator, run):
    """The rule lives in the gate: the API (and the CLI and MCP) refuse an empty reason as
    the console's form does, and the gate keeps waiting."""
    gate = decided_gate(run, None, status=Gate.Status.PENDING)
    for body in ({}, {"reason": "   "}):
        refused = as_operator.post(f"/api/runs/{run.pk}/reject", body)
        assert refused.status_code == 400
        assert refused.body["detail"] == "Say why you reject: the reason stays on the run."
    gate.refresh_from_db()
    assert gate.status == "pending"
    with pytest.raises(CommandError, match="Say why you reject"):
        call_command("run", "reject", str(run.pk), stdout=StringIO())
    assert as_operator.post(f"/api/runs/{run.pk}/reject", {"reason": "off"}).status_code == 200


def test_approve_names_a_gate_that_is_not_this_runs(as_operator, run):
    response = as_operator.post(f"/api/runs/{run.pk}/approve", {"gate": 424242})
    assert response.status_code == 404 and "no gate 424242" in response.body["detail"]


@pytest.mark.parametrize("action", ["approve", "reject", "cancel", "resume"])
def test_viewer_may_not_act(as_viewer, run, action):
    assert as_viewer.post(f"/api/runs/{run.pk}/{action}").status_code == 403


@pytest.mark.parametrize("action", ["approve", "reject", "cancel", "resume"])
def test_actions_on_unknown_run_are_404(as_operator, db, action):
    assert as_operator.post(f"/api/runs/424242/{action}").status_code == 404


def test_approve_body_must_be_an_object(as_operator, run):
    assert as_operator.post(f"/api/runs/{run.pk}/approve", raw="nope").status_code == 400
    assert as_operator.post(f"/api/runs/{run.pk}/approve", raw="[1, 2]").status_code == 422
    assert as_operator.post(f"/api/runs/{run.pk}/reject", raw='"why"').status_code == 422
    assert as_operator.post("/api/runs", raw='["guided-refine"]').status_code == 422
    wrong_type = as_operator.post(f"/api/runs/{run.pk}/approve", {"comment": 5})
    assert wrong_type.status_code == 422 and "comment" in wrong_type.body["detail"]


def test_cancel_then_resume(as_operator, run):
    cancelled = as_operator.post(f"/api/runs/{run.pk}/cancel")
    assert cancelled.status_code == 200 and cancelled.body["status"] == "cancelled"
    again = as_operator.post(f"/api/runs/{run.pk}/cancel")
    assert again.status_code == 409
    resumed = as_operator.post(f"/api/runs/{run.pk}/resume")
    assert resumed.status_code == 200 and resumed.body["status"] == "running"
    event = run.events.order_by("-seq").first()
    assert event.data["surface"] == "api" and event.data["by"] == "otto"


def test_resume_a_live_run_is_409(as_operator, run):
    response = as_operator.post(f"/api/runs/{run.pk}/resume")
    assert response.status_code == 409 and "failed or cancelled" in response.body["detail"]


def test_runs_list_filters_by_search_status_and_recipe(as_viewer, bundled, operator):
    kettle = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="a new Kettle"
    )
    other = services.start_run(
        bundled["guided-refine"], actor=Actor.operator(operator, "console"), message="a haiku"
    )
    Run.objects.filter(pk=other.pk).update(status="failed")
    ids = lambda response: [r["id"] for r in response.body["items"]]  # noqa: E731
    assert ids(as_viewer.get("/api/runs", q="kettle")) == [kettle.pk]
    assert ids(as_viewer.get("/api/runs", status="failed")) == [other.pk]
    assert ids(as_viewer.get("/api/runs", recipe="counter-loop")) == [kettle.pk]
    assert ids(as_viewer.get("/api/runs", recipe="counter-loop", status="failed")) == []


def test_runs_list_refuses_unknown_parameters(as_viewer, bundled):
    response = as_viewer.get("/api/runs", stauts="failed")
    assert response.status_code == 422
    assert "Unknown query parameter: stauts" in response.body["detail"]
    assert "status" in response.body["detail"]


def test_run_detail_reads_status_and_gate_from_one_snapshot(transactional_db):
    """A poller must never see "running" beside the gate that paused the run: the detail
    is read in one repeatable-read transaction on PostgreSQL."""
    from django.db import connection

    from runs.queries import one_snapshot

    with one_snapshot():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SHOW transaction_isolation")
                assert cursor.fetchone()[0] == "repeatable read"
        assert connection.in_atomic_block
