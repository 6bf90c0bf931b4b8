"""Provider limits shared by every worker: a scripted provider on 127.0.0.1 that answers
at most 2 calls at once (429 with Retry-After beyond), runs through two worker processes
(as on two hosts). Waiting holds no worker process and spends no attempt."""

from __future__ import annotations

import signal
import threading

import pytest
from prometheus_client.parser import text_string_to_metric_families

from runs.inbox import ranked_attention
from runs.models import Iteration, Run, RunEvent
from runs.orchestration.state import run_state
from runs.serializers import run_summary
from tests.conftest import wait_for, wait_run
from tests.limits.conftest import QUICK
from tests.sandbox.conftest import start_private_worker

RECIPE = """
name: limited-{n}
provider: agent
model: fake-model
providers:
  agent: {{kind: openai, base_url: "{url}/v1", api_key_env: FAKE_PROVIDER_KEY{limits}}}
nodes:
  - id: work
    loop:
      prompt: "Say something."
      until: Done
      max_iterations: 2
"""
UNLIMITED = """
name: unlimited
provider: demo
nodes:
  - id: hello
    bash: echo hello
"""


def start_limited(start, fake_ai, count: int, limits: str) -> list[Run]:
    return [
        start(RECIPE.format(n=n, url=fake_ai.url, limits=limits), slug=f"limited-{n}")
        for n in range(count)
    ]


def all_finished(runs) -> bool:
    return (
        not Run.objects.filter(pk__in=[r.pk for r in runs])
        .exclude(status__in=Run.TERMINAL)
        .exists()
    )


def says_what_it_waits_for(run, client, operator) -> None:
    """The run page, the inbox and the API say what the run's iteration waits for."""
    words = "waiting for provider agent (3 ahead)"
    client.force_login(operator)
    assert "Waiting for provider agent (3 ahead)" in client.get(f"/runs/{run.pk}/").content.decode()
    reasons = {item.run.pk: item.reason for item in ranked_attention()}
    assert reasons[run.pk] == words
    (wait,) = run_summary(run)["waiting_for_provider"]
    assert (wait["provider"], wait["ahead"], wait["words"]) == ("agent", 3, words)
    assert run_state(run)["waiting_for_provider"][0]["words"] == words  # MCP's get_run
    assert words in client.get("/").content.decode()


def test_twelve_runs_share_two_slots_and_a_waiting_run_holds_no_worker(
    limits_workers, start, fake_ai, client, operator
):
    held = threading.Event()

    def answer_when_released(body):
        held.wait(120)
        return "All said. Done."

    fake_ai.capacity, fake_ai.delay = 2, 0.05
    fake_ai.answers = [answer_when_released] * 12
    runs = start_limited(start, fake_ai, 12, ", max_concurrent: 2")
    # Two are being answered (and held there); the ten others wait, and say so.
    waiting = Iteration.objects.filter(status="pending", waiting_for="agent")
    # Each asks again every second or so, and says where it stands in the queue.
    wait_for(
        lambda: (
            sorted(waiting.values_list("waiting_ahead", flat=True)) == list(range(10))
            and fake_ai.in_flight == 2
        ),
        90,
    )
    assert waiting.get(waiting_ahead=3).waiting_words == "waiting for provider agent (3 ahead)"
    third = waiting.get(waiting_ahead=3).run
    says_what_it_waits_for(third, client, operator)
    # Four worker processes, twelve runs: one that needs no provider still goes through.
    other = wait_run(start(UNLIMITED, slug="unlimited"), "completed", "failed", timeout=60)
    assert other.status == "completed" and not all_finished(runs)
    held.set()
    wait_for(lambda: all_finished(runs), 180, message="the twelve limited runs to finish")
    assert [Run.objects.get(pk=r.pk).status for r in runs] == ["completed"] * 12
    assert fake_ai.peak == 2 and fake_ai.throttled == 0
    its = Iteration.objects.filter(run__in=runs)
    assert its.count() == 12 and set(its.values_list("attempts", flat=True)) == {1}
    assert not its.exclude(waiting_for="").exists()  # none says it waits once it ran
    assert RunEvent.objects.filter(run__in=runs, kind="provider_wait").count() == 10


def throttled(client) -> float:
    scraped = client.get("/metrics").content.decode()
    for family in text_string_to_metric_families(scraped):
        for sample in family.samples:
            if sample.name == "loop_provider_throttled_total" and sample.labels == {
                "provider": "agent"
            }:
                return sample.value
    return 0.0


def test_a_busy_answer_puts_the_call_back_without_spending_an_attempt(
    limits_workers, start, fake_ai, client, admin_user
):
    # The console allows four at once, the provider two: the others are told 429.
    fake_ai.capacity, fake_ai.delay, fake_ai.retry_after = 2, 0.15, 1
    client.force_login(admin_user)
    before = throttled(client)
    runs = start_limited(start, fake_ai, 6, ", max_concurrent: 4")
    wait_for(lambda: all_finished(runs), 180, message="the six runs to finish")
    assert [Run.objects.get(pk=r.pk).status for r in runs] == ["completed"] * 6
    assert fake_ai.throttled > 0 and fake_ai.peak <= 2
    its = Iteration.objects.filter(run__in=runs)
    assert set(its.values_list("attempts", flat=True)) == {1}
    busy = [e for r in runs for e in Run.objects.get(pk=r.pk).events.filter(kind="provider_busy")]
    assert busy and {e.data["status"] for e in busy} == {429}
    assert all(e.data["wait_seconds"] >= 1 for e in busy)  # its Retry-After, at least
    for it in its:
        assert "429" not in it.output and it.error == ""
    # /metrics and the providers' admin count them, every worker's together.
    assert throttled(client) - before == fake_ai.throttled
    panel = client.get("/admin/runs/providerconfig/").content.decode()
    assert 'data-provider-limits="agent"' in panel and "Limits at work" in panel


@pytest.mark.parametrize("limit", ["0", "-1", "two", "1.5"])
def test_a_limit_must_be_a_whole_number_above_zero(db, limit):
    from recipes.validation import validate_source

    source = RECIPE.format(n=0, url="http://127.0.0.1:1", limits=f", max_concurrent: {limit}")
    result = validate_source(source, "limited.yaml")
    assert not result.ok
    assert any("max_concurrent must be a whole number above 0" in p.message for p in result.errors)


def test_a_worker_killed_holding_a_slot_gives_it_back_within_a_lease(
    limits_workers, start, fake_ai, worker_env, tmp_path
):
    held = threading.Event()
    fake_ai.answers = [lambda body: (held.wait(120), "Never heard.")[1], "Second. Done."]
    first = start_limited(start, fake_ai, 1, ", max_concurrent: 1")[0]
    wait_for(lambda: fake_ai.in_flight == 1, 60)  # the first call holds the only slot
    for worker in limits_workers:
        worker.stop(signal.SIGKILL)  # both hosts lost, the slot's holder with them
    (tmp_path / "c").mkdir()
    replacement = start_private_worker(worker_env, tmp_path / "c", "limits", **QUICK)
    try:
        source = RECIPE.format(n=1, url=fake_ai.url, limits=", max_concurrent: 1")
        second = wait_run(start(source, slug="limited-1"), "completed", "failed", timeout=120)
        assert second.status == "completed", second.error
        # It waited for the dead worker's slot, which came back when its lease ran out.
        assert second.events.filter(kind="provider_wait").exists()
        assert Iteration.objects.get(run=first).status == "running"  # the sweep's, later
    finally:
        held.set()
        replacement.stop()


def test_a_judge_on_the_same_one_slot_provider_does_not_wait_for_its_own_loop(
    limits_workers, start, fake_ai
):
    def answer(body):
        asked = body["messages"][-1]["content"]
        return '{"score": 7, "reason": "fine"}' if "Score the answer" in asked else "Draft. Done."

    fake_ai.answers = [answer] * 4
    source = RECIPE.format(n=0, url=fake_ai.url, limits=", max_concurrent: 1").replace(
        "      max_iterations: 2\n",
        '      max_iterations: 2\n      score: {judge: {rubric: "Rate it 0-10."}}\n',
    )
    run = wait_run(start(source, slug="judged"), "completed", "failed", timeout=120)
    assert run.status == "completed", run.error
    it = Iteration.objects.get(run=run)
    assert it.score == 7 and it.score_detail["judge"]["provider"] == "agent"
