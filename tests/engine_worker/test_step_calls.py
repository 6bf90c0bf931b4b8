"""A prompt step is a one-iteration node: its agent call is an iteration of its row (the
prompt, the answer, the usage and the timing, as every agent call's), which each retry of
the step claims again."""

from runs import services
from runs.actor import ENGINE
from tests.conftest import wait_run

ONE = """
nodes:
  - id: ask
    prompt: "@*: answered"
"""

RETRIED = """
nodes:
  - id: ask
    prompt: "@*: partial\\n@exit *: 3"
    retry: {max_attempts: 2, delay_ms: 10}
"""


def call_events(run) -> list[str]:
    found = run.events.filter(step="ask", kind__startswith="iteration_").order_by("seq")
    return list(found.values_list("kind", flat=True))


def test_a_prompt_step_s_call_is_its_one_iteration(live_worker, make_scripted_recipe):
    run = services.start_run(make_scripted_recipe(ONE), actor=ENGINE, message="m")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    row = run.nodes.get(node_id="ask")
    it = row.iterations.get()
    assert (it.number, it.status, it.attempts) == (1, "completed", 1)
    assert it.output == row.output == "answered" and "@*: answered" in it.prompt
    assert it.duration_ms is not None and it.started_at and it.finished_at
    assert "provider" in row.state and "tokens_in" not in row.state
    assert call_events(run) == ["iteration_started", "iteration_completed"]


def test_each_retry_claims_the_same_call_again(live_worker, make_scripted_recipe):
    run = services.start_run(make_scripted_recipe(RETRIED), actor=ENGINE, message="m")
    wait_run(run, "completed", "failed")
    assert run.status == "failed"
    row = run.nodes.get(node_id="ask")
    assert row.status == "failed"
    it = row.iterations.get()
    assert (it.number, it.status, it.attempts) == (1, "failed", 2)
    assert "partial" in it.output  # what the agent printed stays on its call
    assert call_events(run) == [
        "iteration_started",
        "iteration_failed",
        "iteration_started",
        "iteration_failed",
    ]
