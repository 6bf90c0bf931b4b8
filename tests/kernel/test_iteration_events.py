"""Every loop kind runs its agent calls through the kernel's one lifecycle, so the
iteration events of every kind carry the same keys (runs/models/agent_call.py): the API
and the live stream read them whatever the kind. Each kind runs a bundled recipe (or a
small one) on the demo agent through a real worker; a workflow loop and a loop_group also
fail once, so `iteration_failed` is compared too."""

from __future__ import annotations

from loops.stepmachine.demo import FEATURE_BRANCH, create_repository
from runs import services
from runs.actor import ENGINE, Actor
from runs.models.agent_call import EVENT_KEYS
from tests.conftest import wait_run
from tests.stepmachine.conftest import settled

FAILING_LOOP = """
name: failing loop
providers:
  broken: {kind: command, command: "echo broken; exit 3"}
nodes:
  - id: work
    provider: broken
    loop:
      prompt: Try.
      until: COMPLETE
      max_iterations: 2
"""

GROUP = """
name: a group
provider: demo
nodes:
  - id: polish
    loop_group:
      until_bash: test "$(wc -l < rounds)" -ge 2
      max_iterations: 3
      nodes:
        - id: draft
          prompt: Draft it.
        - id: count
          depends_on: [draft]
          bash: echo x >> rounds
"""

FAILING_GROUP = """
name: a failing group
provider: demo
nodes:
  - id: polish
    loop_group:
      until: COMPLETE
      max_iterations: 2
      nodes:
        - id: check
          bash: exit 4
"""


def by(person) -> Actor:
    return Actor.operator(person, "console")


def iteration_events(run) -> list:
    return list(run.events.filter(kind__in=EVENT_KEYS).order_by("seq"))


def test_every_kind_logs_its_iteration_events_with_the_same_keys(
    live_worker, bundled, make_recipe, operator, tmp_path
):
    repository = create_repository(tmp_path)
    runs = {
        "workflow loop": services.start_run(bundled["counter-loop"], by(operator), message="m"),
        "failing workflow loop": services.start_run(
            make_recipe(FAILING_LOOP, slug="broken"), ENGINE
        ),
        "loop_group": services.start_run(make_recipe(GROUP, slug="group"), ENGINE),
        "failing loop_group": services.start_run(
            make_recipe(FAILING_GROUP, slug="group-fails"), ENGINE
        ),
        "python loop": services.start_run(
            bundled["scored-writer-reviewer"], ENGINE, message="Copy"
        ),
        "driven loop": services.start_run(
            bundled["launch-note"], by(operator), message="Widget 2.0"
        ),
        "step machine": services.start_run(
            bundled["no-mistakes-demo"],
            by(operator),
            inputs={"branch": FEATURE_BRANCH},
            workdir=str(repository),
        ),
    }
    for name, run in runs.items():
        if name == "step machine":
            settled(run, "approved", "completed_unreviewed", timeout=300)
        else:
            wait_run(run, "completed", "failed", timeout=180)
        expected = "failed" if name.startswith("failing") else run.status
        assert run.status == expected, (name, run.error)

    seen: dict[str, set[str]] = {kind: set() for kind in EVENT_KEYS}
    for name, run in runs.items():
        events = iteration_events(run)
        kinds = {event.kind for event in events}
        assert {"iteration_started"} <= kinds, name
        ended = "iteration_failed" if name.startswith("failing") else "iteration_completed"
        assert ended in kinds, (name, kinds)
        for event in events:
            assert set(event.data) == set(EVENT_KEYS[event.kind]), (name, event.kind, event.data)
            seen[event.kind].add(name)
        # Each started iteration ends with one event (a failing one with `iteration_failed`).
        started = [e.data["iteration"] for e in events if e.kind == "iteration_started"]
        ends = [e for e in events if e.kind != "iteration_started"]
        assert sorted({(e.step, e.data["iteration"]) for e in ends}) == sorted(
            {(e.step, e.data["iteration"]) for e in events if e.kind == "iteration_started"}
        ), (name, started)
        for event in ends:
            assert isinstance(event.data["duration_ms"], int), (name, event.data)
            if event.kind == "iteration_failed":
                assert event.data["error"] and event.data["channels"] is None, name
            else:
                assert event.data["error"] is None, name
                assert isinstance(event.data["channels"], list), name
    assert seen["iteration_started"] == set(runs)
    assert seen["iteration_failed"] >= {"failing workflow loop", "failing loop_group"}
