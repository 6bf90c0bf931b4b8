"""The step machine through a real worker on PostgreSQL and Redis: every step kind, the
tick bounds, human.wait both ways. Roles are played by a scripted command agent that
records handoffs with `$LOOP_HANDOFF_CMD` from its shell."""

import pytest
from django.core.management import call_command

from loops.stepmachine import handoffs
from runs import services
from runs.actor import Actor
from runs.models import Gate, Iteration
from tests.stepmachine.conftest import calls, events, machine, settled, wait_event

EVERY_KIND = """
schema: planeai.loop.recipe.v1
id: every-kind
name: Every step kind
roles:
  maker: {provider: scripted, mode: write, isolation: project}
policy: {max_rounds: 3}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Goal: {{ inputs.goal }} (run {{ loop_run.id }} of {{ recipe.id }})
      @handoff 1: completed: first pass done
  - id: wait_make
    kind: handoff.wait
    from: maker
    on: {completed: phase}
  - id: phase
    kind: loop.status
    status: verifying
  - id: check
    kind: gates.run
    role: maker
    gates:
      - name: exists
        command: test -f done.txt
    on: {pass: passed, fail: nudge, error: nudge}
  - id: nudge
    kind: session.prompt
    role: maker
    select: latest
    prompt: |
      Round {{ runtime.round }}. The check said: {{ runtime.last_error }}
      @write 2: done.txt: ok
      @handoff 2: completed: wrote done.txt
  - id: wait_nudge
    kind: handoff.wait
    from: maker
    on: {completed: again}
  - id: again
    kind: round.next
    next: check
  - id: passed
    kind: loop.event
    event_kind: checks.passed
  - id: ship
    kind: human.wait
    prompt: "Round {{ runtime.round }}: ship it?"
  - id: done
    kind: loop.status
    status: approved
"""


def test_every_step_kind_in_one_run(live_worker, scripted, plane_recipe, operator):
    run = services.start_run(
        plane_recipe(EVERY_KIND), actor=Actor.operator(operator, "console"), message="a greeting"
    )
    settled(run, "paused")
    ticks = [(e.step, e.data["kind"]) for e in events(run, "tick")]
    assert [kind for _, kind in ticks] == [
        "session.create",
        "handoff.wait",
        "loop.status",
        "gates.run",
        "session.prompt",
        "handoff.wait",
        "round.next",
        "gates.run",
        "loop.event",
        "human.wait",
    ]
    assert events(run, "run_verifying"), "loop.status verifying is a status the run had"
    first, second = calls(run)
    assert f"Goal: a greeting (run {run.pk} of every-kind)" in first["prompt"]
    assert first["handoff_cmd"] and not first["has_database_url"]
    # session.prompt re-prompts the live session, with the gate's output as last_error
    assert second["session"] == first["session"] and second["resume"]
    assert "The check said: $ test -f done.txt" in second["prompt"]
    assert "[gate exists: exit 1]" in second["prompt"]
    results = [e.data["result"] for e in events(run, "gates_finished")]
    assert results == ["fail", "pass"]
    assert events(run, "loop_event")[0].data["event"] == "checks.passed"
    gate = Gate.objects.get(run=run, status="pending")
    assert (gate.node_id, gate.message) == ("ship", "Round 2: ship it?")
    assert machine(run).round == 2
    services.approve(gate.pk, Actor.operator(operator, "api"))
    settled(run, "approved")
    assert run.finished_at is not None and run.error == ""
    turns = Iteration.objects.filter(run=run).order_by("id")
    assert [(t.node_id, t.number, t.status) for t in turns] == [
        ("maker", 1, "completed"),
        ("maker", 2, "completed"),
    ]
    assert turns[1].session_id == turns[0].session_id


HUMAN = """
schema: planeai.loop.recipe.v1
id: human-wait
name: Human waits
steps:
  - id: first
    kind: human.wait
    prompt: Look at it.
  - id: second
    kind: human.wait
    prompt: "Your feedback was: {{ runtime.last_error }}"
  - id: done
    kind: loop.status
    status: approved
"""


def test_human_wait_feedback_goes_on_and_reject_stops(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(HUMAN), actor=Actor.operator(operator, "console"))
    settled(run, "paused")
    first = Gate.objects.get(run=run, status="pending")
    assert first.approve_label == "Accept & complete"
    services.approve(first.pk, Actor.operator(operator, "console"), comment="more tests")
    first.refresh_from_db()
    assert first.status == "iterated"
    settled(run, "paused")
    second = Gate.objects.get(run=run, status="pending")
    assert second.message == "Your feedback was: more tests"
    services.reject(second.pk, Actor.operator(operator, "cli"), reason="not like this")
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "rejected at second by otto: not like this"


def test_human_wait_accept_goes_on(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(HUMAN), actor=Actor.operator(operator, "console"))
    for _ in range(2):
        settled(run, "paused")
        gate = Gate.objects.get(run=run, status="pending")
        services.approve(gate.pk, Actor.operator(operator, "console"))
    settled(run, "approved")
    assert [g.status for g in run.gates.order_by("id")] == ["accepted", "accepted"]


def test_human_wait_decided_from_manage_py_run_approve(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(HUMAN), actor=Actor.operator(operator, "console"))
    settled(run, "paused")
    call_command("run", "approve", str(run.pk), "--user", "otto", "--comment", "cli feedback")
    settled(run, "paused")
    first, second = run.gates.order_by("id")
    assert (first.status, first.surface, first.decided_by.username) == ("iterated", "cli", "otto")
    assert second.message == "Your feedback was: cli feedback"
    call_command("run", "approve", str(run.pk), "--user", "otto")
    settled(run, "approved")
    second.refresh_from_db()
    assert (second.status, second.surface) == ("accepted", "cli")


def test_human_wait_rejected_from_manage_py_run_reject(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(HUMAN), actor=Actor.operator(operator, "console"))
    settled(run, "paused")
    call_command("run", "reject", str(run.pk), "--user", "otto", "--reason", "not from here")
    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error == "rejected at first by otto: not from here"
    assert run.gates.get().status == "rejected"


REUSE = """
schema: planeai.loop.recipe.v1
id: reuse
name: Session reuse
roles:
  maker: {provider: scripted, mode: write, isolation: project, session_reuse: true}
  checker: {provider: scripted, mode: review, isolation: readonly, session_reuse: false}
steps:
  - id: m1
    kind: session.create
    role: maker
    prompt: |
      @handoff 1: completed: one
      @handoff 2: completed: two, then I crash
      @exit 2: 3
      @handoff *: completed: fresh
  - {id: w1, kind: handoff.wait, from: maker, on: {completed: c1}}
  - id: c1
    kind: session.create
    role: checker
    prompt: "@handoff *: completed: checked"
  - {id: wc1, kind: handoff.wait, from: checker, on: {completed: m2}}
  - id: m2
    kind: session.create
    role: maker
    prompt: |
      @handoff 2: completed: two, then I crash
      @exit 2: 3
  - {id: w2, kind: handoff.wait, from: maker, on: {completed: c2}}
  - id: c2
    kind: session.create
    role: checker
    prompt: "@handoff *: completed: checked again"
  - {id: wc2, kind: handoff.wait, from: checker, on: {completed: m3}}
  - id: m3
    kind: session.create
    role: maker
    prompt: "@handoff *: completed: fresh"
  - {id: w3, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: completed_unreviewed}
"""


def test_session_reuse_and_its_fallback_when_the_session_crashed(
    live_worker, scripted, plane_recipe, operator
):
    run = services.start_run(plane_recipe(REUSE), actor=Actor.operator(operator, "console"))
    settled(run, "completed_unreviewed")
    by_role = {}
    for call in calls(run):
        by_role.setdefault(call["role"], []).append(call)
    maker = by_role["maker"]
    assert [(c["turn"], c["resume"]) for c in maker] == [(1, False), (2, True), (1, False)]
    assert maker[0]["session"] == maker[1]["session"]  # reused
    assert maker[2]["session"] != maker[0]["session"]  # the crashed one was replaced
    checker = by_role["checker"]
    assert [c["resume"] for c in checker] == [False, False]  # session_reuse: false
    assert checker[0]["session"] != checker[1]["session"]
    assert checker[0]["read_only"] == "1" and maker[0]["read_only"] == "0"
    rows = {(r.node_id, r.generation): r.status for r in run.nodes.filter(kind="session")}
    assert rows == {
        ("maker", 0): "failed",
        ("maker", 1): "completed",
        ("checker", 0): "completed",
        ("checker", 1): "completed",
    }


ROUNDS = """
schema: planeai.loop.recipe.v1
id: rounds
name: Rounds
policy: {max_rounds: 2}
steps:
  - {id: work, kind: loop.event, event_kind: worked}
  - {id: again, kind: round.next, next: work}
"""

TICKS = """
schema: planeai.loop.recipe.v1
id: ticks
name: Ticks
policy: {max_ticks: 5}
steps:
  - {id: a, kind: loop.event, event_kind: a}
  - {id: b, kind: loop.event, event_kind: b, next: a}
"""


def test_round_next_past_max_rounds_blocks(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(ROUNDS), actor=Actor.operator(operator, "console"))
    settled(run, "blocked")
    assert run.error == "max_rounds (2) reached"
    assert [e.data["event"] for e in events(run, "loop_event")] == ["worked", "worked"]
    assert machine(run).round == 2 and not run.is_terminal
    with pytest.raises(services.Conflict, match="blocked"):
        handoffs.record_handoff(run.pk, actor=Actor("cli"), role="x", status="completed")


def test_max_ticks_blocks(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(TICKS), actor=Actor.operator(operator, "console"))
    settled(run, "blocked")
    assert run.error == "max_ticks (5) reached"
    assert len(events(run, "tick")) == 5 and machine(run).ticks == 5


MANY = "\n".join(
    ["schema: planeai.loop.recipe.v1", "id: many", "name: Many steps", "steps:"]
    + [f"  - {{id: e{i}, kind: loop.event, event_kind: e{i}}}" for i in range(12)]
    + ["  - {id: done, kind: loop.status, status: completed_unreviewed}"]
)


def test_one_trigger_runs_at_most_ten_ticks(live_worker, plane_recipe, operator, capsys):
    run = services.start_run(plane_recipe(MANY), actor=Actor.operator(operator, "console"))
    wait_event(run, "ticks_paused")
    run.refresh_from_db()
    assert run.status == "running"
    state = machine(run)
    assert state.ticks == 10 and state.current == "e10"
    assert "paused after 10 steps" in state.waiting
    call_command("loop", "tick", str(run.pk))
    assert "3 tick(s): e10, e11, done" in capsys.readouterr().out
    run.refresh_from_db()
    assert run.status_word == "completed_unreviewed"


BRANCHES = """
schema: planeai.loop.recipe.v1
id: waits
name: Waits for handoffs
roles:
  a: {provider: demo, mode: write, isolation: project}
  b: {provider: demo, mode: write, isolation: project}
steps:
  - {id: first_a, kind: handoff.wait, from: a, on: {completed: from_b}}
  - {id: from_b, kind: handoff.wait, from: b, on: {completed: again_a}}
  - {id: again_a, kind: handoff.wait, from: a, on: {completed: done, failed: failed}}
  - {id: done, kind: loop.status, status: approved}
  - {id: failed, kind: loop.status, status: failed}
"""


def test_a_stale_handoff_is_not_consumed(live_worker, plane_recipe, operator):
    run = services.start_run(plane_recipe(BRANCHES), actor=Actor.operator(operator, "console"))
    actor = Actor.operator(operator, "api")
    wait_event(run, "step_waiting")
    handoffs.record_handoff(run.pk, actor=actor, role="a", status="completed", summary="first")
    wait_event(run, "handoff_consumed")
    handoffs.record_handoff(run.pk, actor=actor, role="a", status="failed", summary="early, stale")
    handoffs.record_handoff(run.pk, actor=actor, role="b", status="completed", summary="b done")
    wait_event(run, "handoff_consumed", 2)
    # again_a must not take a's handoff recorded before b's was consumed.
    call_command("loop", "tick", str(run.pk))
    run.refresh_from_db()
    assert run.status == "running" and machine(run).current == "again_a"
    stale = run.handoffs.get(summary="early, stale")
    assert stale.consumed_at is None
    handoffs.record_handoff(run.pk, actor=actor, role="a", status="completed", summary="fresh")
    settled(run, "approved")
    consumed = list(run.handoffs.exclude(consumed_at=None).order_by("seq"))
    assert [h.summary for h in consumed] == ["first", "b done", "fresh"]


FILE = """
schema: planeai.loop.recipe.v1
id: file-handoff
name: File handoff
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      @write 1: handoff.json: {"schema": "planeai.handoff.v1", "status": "completed"}
      @write 1: .planeai-handoff.json: {"schema": "planeai.handoff.v1", "status": "completed"}
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_handoff_written_to_a_file_is_ignored(live_worker, scripted, plane_recipe, operator):
    run = services.start_run(plane_recipe(FILE), actor=Actor.operator(operator, "console"))
    settled(run, "running")
    wait_event(run, "iteration_completed")
    call_command("loop", "tick", str(run.pk))
    run.refresh_from_db()
    assert run.status == "running" and not run.handoffs.exists()
    assert machine(run).waiting == "waiting for a handoff from maker"
    call_command(
        "loop",
        "handoff",
        str(run.pk),
        "--role",
        "maker",
        "--status",
        "completed",
        "--user",
        "otto",
    )
    settled(run, "approved")


BIG = """
schema: planeai.loop.recipe.v1
id: big-output
name: Big output
inputs:
  missing_program: {default: no-such-program-for-loop-tests}
  word: {default: "$(touch pwned)"}
steps:
  - id: quiet
    kind: gates.run
    role: r
    gates:
      - name: literal
        command: printf '%s' {{ inputs.word }} > word.txt
      - name: absent
        command: "{{ inputs.missing_program }}"
    on: {pass: loud, fail: loud, error: loud}
  - id: loud
    kind: gates.run
    role: r
    gates:
      - name: noisy
        command: python3 -c "import sys; sys.stdout.write('x' * 300000 + '\\nLAST LINE\\n')"; exit 2
    on: {pass: done, fail: stop, error: done}
  - {id: stop, kind: loop.status, status: needs_human}
  - {id: done, kind: loop.status, status: approved}
roles:
  r: {provider: demo, mode: write, isolation: project}
"""


def test_gates_run_routes_and_truncates_its_output(live_worker, plane_recipe, operator):
    from pathlib import Path

    from loops.stepmachine.context import run_folders

    run = services.start_run(plane_recipe(BIG), actor=Actor.operator(operator, "console"))
    settled(run, "needs_human")
    finished = events(run, "gates_finished")
    assert [e.data["result"] for e in finished] == ["error", "fail"]
    assert [g["exit_code"] for g in finished[0].data["gates"]] == [0, 127]
    workdir, _ = run_folders(run)
    assert (workdir / "word.txt").read_text() == "$(touch pwned)"
    assert not (workdir / "pwned").exists()
    last_error = machine(run).last_error
    log = finished[1].data["log"]
    assert len(last_error.encode()) < 100 * 1024 + 200
    assert last_error.endswith(f"[output truncated to its last 100 KB; full log: {log}]")
    assert "LAST LINE" in last_error
    full = Path(log).read_text()
    assert "x" * 300000 + "\nLAST LINE" in full and "[gate noisy: exit 2]" in full
    assert "needs_human at step stop" in run.error or "set the run to needs_human" in run.error


ENDS_WITH_A_TURN = """
schema: planeai.loop.recipe.v1
id: ends-with-a-turn
name: Ends with a turn
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Make it.
      @say *: made it
"""


def test_past_the_last_step_the_run_ends_after_the_turn_in_flight(
    live_worker, scripted, plane_recipe, operator
):
    run = settled(
        services.start_run(
            plane_recipe(ENDS_WITH_A_TURN), actor=Actor.operator(operator, "console"), message="m"
        ),
        "completed_unreviewed",
    )
    # The machine waited for the turn the last step sent, instead of cancelling it.
    (turn,) = Iteration.objects.filter(run=run, node_id="maker")
    assert turn.status == Iteration.Status.COMPLETED and "made it" in turn.output
    assert [c["turn"] for c in calls(run)] == [1]
    assert machine(run).ended_at_step == "make" and not machine(run).finishing
    (waited,) = events(run, "step_waiting")
    assert waited.data["reason"] == "the steps ended after make: waiting for maker"
