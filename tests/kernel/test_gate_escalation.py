"""A gate deadline's escalation (`escalate_to`, `escalate_after`) and its own declared
decision (`timeout_decision`), through a real worker and the sweep: at the first deadline
the sweep escalates (an event, the `gate_escalated` signal, a second deadline), at the
second `on_timeout` acts; a timeout decision is taken "by the deadline" and the run follows
its branch. The format refuses, each on its line, what would let a deadline decide for a
person or an escalation without its deadlines. Time moves by the sweep's `now`, never by
sleeping."""

from __future__ import annotations

from datetime import timedelta

import pytest

from loops.python.format import parse_python
from recipes.loader import load_recipe
from recipes.validation import validate_source
from runs import services
from runs.actor import ENGINE
from runs.engine.deadlines import GateDeadline, approving
from runs.event_text import describe
from runs.executor.sweep import sweep
from runs.models import Gate, NodeRun, Run
from runs.signals import gate_escalated
from tests.conftest import wait_run
from tests.recipes.test_workflow_loader import assert_error, y

ESCALATING = """
name: escalating-approval
interactive: true
nodes:
  - id: ship
    approval:
      message: Ship it?
      gate_timeout: 30m
      escalate_to: [release-leads, dana]
      escalate_after: 2h
      on_timeout: {action}
  - id: announce
    depends_on: [ship]
    bash: echo shipped
"""

HOLD_BY_DEADLINE = """
name: hold-by-deadline
interactive: true
nodes:
  - id: decide
    approval:
      message: Ship now or hold?
      decisions:
        - {id: ship, label: Ship it}
        - {id: hold, label: Hold}
      gate_timeout: 1h
      timeout_decision: hold
  - id: ship
    depends_on: [decide]
    when: "$decide.output == 'ship'"
    bash: echo shipped
  - id: hold
    depends_on: [decide]
    when: "$decide.output == 'hold'"
    bash: echo held
"""


@pytest.fixture
def escalations():
    """What `runs.signals.gate_escalated` carried, as (gate, now)."""
    heard = []

    def listen(sender, *, run, gate, now, **_):
        heard.append((gate.pk, now))

    gate_escalated.connect(listen, dispatch_uid="test_gate_escalation")
    yield heard
    gate_escalated.disconnect(dispatch_uid="test_gate_escalation")


def deadline_work(counts: dict) -> int:
    """What a sweep did to gates past their deadline."""
    return counts["escalated"] + counts["reminded"] + counts["timed_out"]


def paused_at_gate(make_recipe, source: str, slug: str) -> tuple[Run, Gate]:
    run = services.start_run(make_recipe(source, slug), actor=ENGINE, message="go")
    wait_run(run, "paused", "failed")
    assert run.status == Run.Status.PAUSED, run.error
    return run, services.pending_gate(run)


def test_escalation_fires_at_the_first_deadline_and_on_timeout_at_the_second(
    live_worker, make_recipe, escalations
):
    run, gate = paused_at_gate(make_recipe, ESCALATING.format(action="reject"), "escalate")
    assert gate.escalate_to == ["release-leads", "dana"] and gate.escalate_seconds == 7200
    assert gate.on_timeout_words == "it is escalated to release-leads, dana"
    assert sweep(now=gate.deadline_at - timedelta(seconds=1))["escalated"] == 0

    first = gate.deadline_at + timedelta(seconds=1)
    counts = sweep(now=first)
    assert (counts["escalated"], counts["timed_out"], counts["reminded"]) == (1, 0, 0)
    assert escalations == [(gate.pk, first)]
    gate.refresh_from_db()
    assert gate.is_pending and gate.escalated_at == first
    assert gate.deadline_at == first + timedelta(hours=2)
    event = run.events.get(kind="gate_escalated")
    assert event.data["to"] == ["release-leads", "dana"] and event.data["by"] == "the sweep"
    assert event.data["deadline"] == gate.deadline_at.isoformat()
    assert describe(event) == (
        "the sweep escalated the gate at ship to release-leads, dana: nobody decided within "
        "30 minutes (gate_timeout); they have 2 hours more (escalate_after); then the sweep "
        "rejects it."
    )
    # Escalated once: the gate now waits for its second deadline.
    assert not deadline_work(sweep(now=gate.deadline_at - timedelta(seconds=1)))
    assert len(escalations) == 1

    assert sweep(now=gate.deadline_at + timedelta(seconds=1))["timed_out"] == 1
    wait_run(run, "failed")
    gate.refresh_from_db()
    assert gate.status == Gate.Status.REJECTED and gate.decider == "the sweep"
    assert gate.comment == (
        "no decision within 2 hours 30 minutes (gate_timeout, then escalate_after)"
    )
    assert NodeRun.objects.get(run=run, node_id="announce").status != NodeRun.Status.COMPLETED


def test_an_escalated_gate_is_reminded_once_at_its_second_deadline(
    live_worker, make_recipe, escalations
):
    run, gate = paused_at_gate(make_recipe, ESCALATING.format(action="remind"), "escalate-remind")
    first = sweep(now=gate.deadline_at + timedelta(seconds=1))
    assert (first["escalated"], first["reminded"]) == (1, 0)
    gate.refresh_from_db()
    assert gate.reminded_at is None and gate.on_timeout_words == "a reminder is sent"
    second = gate.deadline_at + timedelta(seconds=1)
    assert sweep(now=second)["reminded"] == 1
    assert not deadline_work(sweep(now=second + timedelta(days=1)))
    gate.refresh_from_db()
    assert gate.is_pending and gate.reminded_at == second and len(escalations) == 1
    assert [e.kind for e in run.events.filter(kind__startswith="gate_")] == [
        "gate_escalated",
        "gate_reminded",
    ]


def test_a_timeout_decision_is_decided_by_the_deadline_and_the_run_follows_it(
    live_worker, make_recipe
):
    run, gate = paused_at_gate(make_recipe, HOLD_BY_DEADLINE, "hold-by-deadline")
    assert gate.timeout_decision == "hold"
    assert gate.on_timeout_words == "the deadline decides “Hold”"
    assert sweep(now=gate.deadline_at - timedelta(seconds=1))["timed_out"] == 0
    assert sweep(now=gate.deadline_at + timedelta(seconds=1))["timed_out"] == 1
    wait_run(run, "completed", "failed")
    assert run.status == Run.Status.COMPLETED, run.error
    gate.refresh_from_db()
    assert (gate.decision, gate.decider, gate.surface) == ("hold", "the deadline", "sweep")
    decided = run.events.get(kind="gate_decided")
    assert decided.data["by"] == "the deadline" and decided.data["decision"] == "hold"
    assert describe(decided).startswith("the deadline chose “hold” at decide")
    rows = {row.node_id: row.status for row in NodeRun.objects.filter(run=run)}
    assert rows["hold"] == NodeRun.Status.COMPLETED
    assert rows["ship"] == NodeRun.Status.SKIPPED
    assert not deadline_work(sweep(now=gate.deadline_at + timedelta(days=1)))


# --- the format: refused at load, each on its line ----------------------------------------

APPROVAL = """
name: t
nodes:
  - id: decide
    approval:
      message: Ship?
      decisions:
        - {id: ship, label: Ship it}
        - {id: hold, label: Hold}
        - {id: later, label: Merge later}
      gate_timeout: 1h
"""


def refused(extra: str, fragment: str, line: int, path: str):
    result = load_recipe(y(APPROVAL) + extra)
    problem = assert_error(result, fragment, line, path)
    assert problem.message.startswith("node 'decide': ")
    assert len(result.errors) == 1, [str(p) for p in result.errors]


@pytest.mark.parametrize(
    "decision, fragment",
    [
        ("ship", "timeout_decision 'ship' completes, approves or ships: a deadline never"),
        ("later", "timeout_decision 'later' completes, approves or ships"),  # its label merges
        ("wait", "timeout_decision 'wait' is not one of this gate's declared decisions "),
    ],
)
def test_a_timeout_decision_that_ships_or_is_not_declared_is_refused(decision, fragment):
    refused(
        f"      timeout_decision: {decision}\n",
        fragment,
        11,
        "nodes[0].approval.timeout_decision",
    )


def test_a_timeout_decision_takes_the_place_of_on_timeout():
    refused(
        "      on_timeout: reject\n      timeout_decision: hold\n",
        "timeout_decision takes the place of on_timeout",
        12,
        "nodes[0].approval.timeout_decision",
    )


def test_a_loop_gates_timeout_decision_that_completes_is_refused():
    result = load_recipe(
        y("""
        name: t
        interactive: true
        provider: demo
        nodes:
          - id: refine
            loop:
              prompt: Improve it.
              until: DONE
              max_iterations: 3
              interactive: true
              gate_message: Read it.
              gate_timeout: 1h
              timeout_decision: enough
              decisions:
                - {id: enough, label: Good enough, then: complete}
                - {id: again, label: Again, text_required: true, then: iterate}
        """)
    )
    assert_error(
        result, "timeout_decision 'enough' completes", 13, "nodes[0].loop.timeout_decision"
    )


def test_escalate_to_needs_a_gate_timeout_and_escalate_after_on_its_line():
    result = load_recipe(
        y("""
        name: t
        nodes:
          - id: ship
            approval:
              message: Ship?
              escalate_to: leads
          - id: merge
            approval:
              message: Merge?
              gate_timeout: 1h
              escalate_to: [leads]
              escalate_after: soon
        """)
    )
    assert_error(result, "escalate_to needs a gate_timeout", 6, "nodes[0].approval.escalate_to")
    assert_error(result, "escalate_to needs escalate_after", 6, "nodes[0].approval.escalate_to")
    assert_error(
        result, "escalate_after 'soon' is not a duration", 12, "nodes[1].approval.escalate_after"
    )
    assert len(result.errors) == 3, [str(p) for p in result.errors]


def test_an_escalation_is_read_into_the_spec_one_name_or_many():
    result = load_recipe(
        y(APPROVAL) + "      escalate_to: release-leads\n      escalate_after: 1d\n"
        "      timeout_decision: hold\n"
    )
    assert result.ok, [str(p) for p in result.errors]
    assert GateDeadline.of(result.spec.node("decide").approval) == GateDeadline(
        3600, "remind", ("release-leads",), 86400, "hold"
    )


SHIP = """
schema: planeai.loop.recipe.v1
id: ship-by
name: Ship by a deadline
steps:
  - id: ship
    kind: human.wait
    prompt: Ship it?
    gate_timeout: 30m
    EXTRA
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_human_wait_takes_the_same_rules(db):
    escalating = SHIP.replace("EXTRA", "escalate_to: [leads]\n    escalate_after: 1h")
    assert validate_source(escalating, "ship.yaml").ok
    (problem,) = validate_source(SHIP.replace("EXTRA", "escalate_to: leads"), "s.yaml").errors
    assert problem.line == 10 and "escalate_to needs escalate_after" in problem.message
    (problem,) = validate_source(SHIP.replace("EXTRA", "timeout_decision: merge"), "s.yaml").errors
    assert problem.line == 10 and "not one of this gate's declared decisions" in problem.message


PYTHON = '''"""Loop"""
from loops.python import Agent, GateOptions, LoopWorkflow

workflow = LoopWorkflow(
    [Agent("writer", "Write.", provider="demo")],
    gate=GateOptions(timeout="2h", escalate_to=["leads"]{after}),
)
'''


def test_a_python_loops_gate_option_escalates_by_the_same_rules():
    assert parse_python(PYTHON.format(after=', escalate_after="1h"')).ok
    (problem,) = parse_python(PYTHON.format(after="")).errors
    assert problem.line == 6 and "escalate_to needs escalate_after" in problem.message
    from loops.python import GateOptions

    options = GateOptions(timeout="2h", escalate_to="leads", escalate_after=timedelta(hours=1))
    assert options.deadline == GateDeadline(7200, "remind", ("leads",), 3600)
    with pytest.raises(ValueError, match="escalate_to needs escalate_after"):
        GateOptions(timeout="2h", escalate_to="leads")


@pytest.mark.parametrize(
    "choice, approves",
    [
        ({"id": "hold", "label": "Hold"}, False),
        ({"id": "again", "then": "iterate"}, False),
        ({"id": "stop", "label": "Stop", "then": "fail"}, False),
        ({"id": "go", "label": "Go", "then": "complete"}, True),
        ({"id": "lgtm", "label": "Approve"}, True),
        ("ship_it", True),
        ({"id": "accept-later", "label": "Later"}, True),
    ],
)
def test_what_counts_as_approving(choice, approves):
    assert approving(choice) is approves
