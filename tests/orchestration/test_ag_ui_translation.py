"""runs.ag_ui.AgUiRun on its own (no database, no server): what a run's events become."""

from runs.ag_ui import AgUiRun


def ev(seq, kind, step="", **data):
    return {"seq": seq, "kind": kind, "step": step, "data": data}


def types(events) -> list[str]:
    """Event types of AgUiRun's answers: events, or (event, seq) pairs."""
    return [(e[0] if isinstance(e, tuple) else e).type.value for e in events]


def test_a_run_cancelled_at_its_gate_ends_with_the_cancelled_outcome():
    run = AgUiRun(5)
    opening = run.open([ev(2, "run_running"), ev(9, "run_paused")])
    assert types(opening) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert opening[-1].outcome.type == "interrupt"
    assert opening[-1].outcome.interrupts[0].reason == "paused"  # no gate seen: the status

    out = run.events(
        [
            ev(10, "gate_decided", "refine", gate=3, status="cancelled"),
            ev(11, "run_cancelled", error="stopped"),
        ],
        {},
    )
    assert types(out) == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    started, _, finished = (e for e, _ in out)
    assert started.run_id == "run-5-11"
    assert finished.outcome.type == "cancelled" and run.ended


def test_a_failed_run_closes_what_is_open_and_ends_with_run_error():
    run = AgUiRun(6)
    run.open([])
    out = run.events(
        [
            ev(1, "run_running"),
            ev(2, "node_started", "build"),
            ev(3, "iteration_started", "build", iteration=1),
        ],
        {},
    )
    out += [(e, None) for e in run.outputs([{"target": "it-9", "offset": 0, "chunk": "half"}])]
    out += run.events([ev(4, "run_failed", error="the agent crashed")], {})
    assert types(out) == [
        "STATE_DELTA",
        "STEP_STARTED",
        "STEP_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "STATE_DELTA",
        "TEXT_MESSAGE_END",
        "STEP_FINISHED",
        "STEP_FINISHED",
        "RUN_ERROR",
    ]
    assert out[-1][0].message == "the agent crashed" and run.ended
    assert run.outputs([{"target": "it-9", "offset": 4, "chunk": " more"}]) == []


def test_text_is_sent_once_and_completed_from_the_database():
    run = AgUiRun(7)
    run.open([ev(1, "run_running")])
    run.events([ev(2, "iteration_started", "draft", iteration=1)], {})
    first = run.outputs([{"target": "it-1", "offset": 0, "chunk": "Hello, "}])
    again = run.outputs([{"target": "it-1", "offset": 3, "chunk": "lo, wor"}])  # overlaps
    assert [e.delta for e in first[1:] + again] == ["Hello, ", "wor"]
    assert run.missing({"target": "it-1", "offset": 20, "chunk": "x"})
    end = run.events(
        [ev(3, "iteration_completed", "draft", iteration=1)],
        {("iteration_completed", "draft", 1): ("it-1", "Hello, world.")},
    )
    assert types(end) == ["TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED"]
    assert end[0][0].delta == "ld."


def test_a_budget_stop_is_an_interrupt_and_steps_reopen_when_the_run_goes_on():
    run = AgUiRun(8)
    run.open([])
    run.events([ev(1, "run_running"), ev(2, "node_started", "write")], {})
    stop = run.events([ev(3, "run_budget_exceeded", error="cost 2 of 2")], {})
    assert types(stop) == ["STATE_DELTA", "STEP_FINISHED", "RUN_FINISHED"]
    [interrupt] = stop[-1][0].outcome.interrupts
    assert (interrupt.reason, interrupt.message) == ("budget_exceeded", "cost 2 of 2")
    assert run.events([ev(4, "budget_changed")], {}) == []  # still waiting
    back = run.events([ev(5, "run_running")], {})
    assert types(back) == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED"]
    assert back[1][0].snapshot["run"]["status"] == "running"
