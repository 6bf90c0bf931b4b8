"""Defects of the engine found in review, each driven in this process with the real
database: the retry delay, an unexpected engine error, and accepting a gate."""

from __future__ import annotations

import pytest

from runs import services, tasks
from runs.actor import ENGINE, Actor
from runs.executor.sweep import sweep
from runs.models import NodeRun, Run
from tests.console.conftest import gated_run, guided_run  # noqa: F401 - fixtures

RETRYING_STEP = """
name: flaky
nodes:
  - id: flaky
    bash: |
      if [ ! -e "$ARTIFACTS_DIR/tried" ]; then touch "$ARTIFACTS_DIR/tried"; echo "first try fails"; exit 3; fi
      echo "second try works"
    retry: {max_attempts: 2, delay_ms: 3000}
"""

ONE_STEP = """
name: one-step
nodes:
  - id: hello
    bash: echo hello
"""


class SweepingClock:
    """Stands in for the `time` module of loops.workflow.steps while a step waits for its
    retry: each sleep advances a virtual clock and runs the sweep as it would look when
    that sleep ended. So the sweep sees every moment of the wait, in order, whatever the
    machine's load: the race is played out exactly, not hoped for."""

    def __init__(self):
        self.elapsed = 0.0
        self.sweeps = 0

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        from datetime import timedelta

        from django.utils import timezone

        self.elapsed += seconds
        sweep(now=timezone.now() + timedelta(seconds=seconds))
        self.sweeps += 1


def test_a_retry_delay_longer_than_the_lease_keeps_the_step(
    transactional_db, make_recipe, broker, settings, monkeypatch
):
    """The step waits 3 s before its retry with a 1 s lease, and the sweep looks at every
    moment of that wait: the lease is renewed, so the step is never taken back and its
    result stands."""
    from loops.workflow import steps

    settings.LOOP_LEASE_SECONDS = 1
    clock = SweepingClock()
    monkeypatch.setattr(steps, "time", clock)
    run = services.start_run(make_recipe(RETRYING_STEP, "flaky"), actor=ENGINE, message="retry")
    tasks.advance_run(run.pk)
    broker.sent.clear()
    row = NodeRun.objects.get(run=run, node_id="flaky")
    tasks.start_node(row.pk)
    assert clock.elapsed >= 3 and clock.sweeps >= 6  # the sweep ran all through the wait
    row.refresh_from_db()
    assert row.status == "completed" and row.output == "second try works"
    assert row.attempts == 1
    assert not run.events.filter(kind="node_requeued").exists()


def test_the_retry_delay_is_bounded(make_recipe, settings):
    from loops.workflow.steps import retry_delay_seconds
    from runs.executor.spec import node_spec, spec_for

    settings.LOOP_MAX_RETRY_DELAY_SECONDS = 2
    run = services.start_run(make_recipe(RETRYING_STEP, "flaky"), actor=ENGINE, message="bounded")
    assert retry_delay_seconds(node_spec(spec_for(run), "flaky")) == 2


def test_an_unexpected_engine_error_fails_the_run_at_once_with_its_message(
    transactional_db, make_recipe, broker, tmp_path, client, viewer
):
    """The working directory is a file: the step cannot start there. The run fails on
    the first delivery with the error on its page, not after the sweep's retries."""
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    run = services.start_run(make_recipe(ONE_STEP, "one-step"), actor=ENGINE, message="broken")
    Run.objects.filter(pk=run.pk).update(workdir=str(not_a_folder))
    broker.send("advance_run", run.pk)
    broker.deliver()
    run.refresh_from_db()
    assert run.status == "failed"
    # The cause in plain words for everyone; the class and the path stay in the log.
    assert "engine error" in run.error and "not a directory" in run.error
    assert str(not_a_folder) not in run.error and "NotADirectoryError" not in run.error
    assert "worker's log" in run.error
    assert not NodeRun.objects.filter(run=run, status__in=NodeRun.UNFINISHED).exists()
    # The cause is on the run page, not only in the server log.
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "engine error" in page and "not a directory" in page


@pytest.mark.parametrize("comment", ["", "one more pass"], ids=["accept", "iterate"])
def test_deciding_a_gate_sends_each_task_once(
    gated_run,  # noqa: F811
    operator,
    broker,
    comment,
    django_capture_on_commit_callbacks,
):
    run, gate = gated_run
    with django_capture_on_commit_callbacks(execute=True):
        services.approve(gate.pk, Actor.operator(operator, "console"), comment=comment)
    if comment:
        assert broker.sent == [("run_iteration", broker.sent[0][1])]
    else:
        assert broker.sent == [("advance_run", (run.pk,))]


FAILING_AGENT = """
name: failing-agent
providers:
  broken:
    kind: command
    command: |
      # a long agent script: its text must not end up in every error message
      if [ "$LOOP_ITERATION" = 1 ]; then echo "a first draft"; exit 0; fi
      echo "working on it"
      echo "giving up: the tests do not pass"
      exit 3
nodes:
  - id: work
    provider: broken
    loop:
      prompt: "try"
      until: COMPLETE
      max_iterations: 3
"""


def test_a_provider_error_is_one_message_and_the_output_shows_once(
    transactional_db, make_recipe, broker, client, viewer
):
    run = services.start_run(make_recipe(FAILING_AGENT, "failing-agent"), actor=ENGINE, message="x")
    broker.deliver()
    run.refresh_from_db()
    assert run.status == "failed"
    it = run.iterations.get(number=2)
    node = NodeRun.objects.get(run=run, node_id="work")
    for error in (run.error, node.error, it.error):
        assert "exited with status 3" in error and "giving up" in error
        assert "long agent script" not in error and "working on it" not in error
    assert "working on it" in it.raw_output
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert page.count("working on it") == 1
    assert "Diff against iteration" not in page
    # The reason is said once, at the top; the node and the iteration point there. (The
    # event log, folded away, keeps its own record of each step.)
    visible = page.split('<details class="events">', 1)[0]
    assert visible.count("exited with status 3") == 1
    assert visible.count("the reason is at the top of the page") == 2


def test_a_cancelled_iteration_keeps_its_output_and_duration_in_the_api(
    transactional_db,
    broker,  # the fixture's rows are hand-made: no worker may act on the run meanwhile
    guided_run,  # noqa: F811
    operator,
):
    from tests.api.conftest import client_for
    from tests.console.conftest import add_iteration

    run, row = guided_run
    it = add_iteration(run, row, 1, status="running", raw_output="line 1\nline 2\n", attempts=1)
    services.cancel_run(run, Actor.operator(operator, "api"))
    body = client_for(operator).get(f"/api/runs/{run.pk}/iterations").body
    (item,) = body["items"]
    assert item["status"] == "cancelled" and item["output"] == "line 1\nline 2\n"
    assert item["duration_ms"] is not None and item["duration_ms"] >= 0
    assert it.pk == item["id"]
