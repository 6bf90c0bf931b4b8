"""`gate_timeout` / `on_timeout` in recipes: refused with the line when wrong (never
approve), read into the spec when right; the same rules for a Python loop's GateOptions."""

from __future__ import annotations

import pytest

from loops.python.format import parse_python
from recipes.loader import load_recipe
from runs.engine.deadlines import GateDeadline
from tests.recipes.test_workflow_loader import assert_error, assert_warning, y

LOOP = """
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
      gate_timeout: {timeout}
      on_timeout: {action}
"""


def test_a_loop_gate_deadline_is_read_into_the_spec():
    result = load_recipe(y(LOOP.format(timeout="1h30m", action="reject")))
    assert result.ok, [str(p) for p in result.errors]
    loop = result.spec.node("refine").loop
    assert GateDeadline.of(loop) == GateDeadline(5400, "reject")


def test_an_approval_deadline_defaults_to_remind():
    result = load_recipe(
        y("""
        name: t
        nodes:
          - id: ship
            approval:
              message: Ship?
              gate_timeout: 2d
        """)
    )
    assert result.ok
    assert GateDeadline.of(result.spec.node("ship").approval) == GateDeadline(172800, "remind")


@pytest.mark.parametrize(
    "timeout, action, fragment, line",
    [
        ("2h", "approve", "on_timeout: approve is not allowed: a deadline never decides", 13),
        ("2h", "skip", "on_timeout must be one of remind, reject, fail, not 'skip'", 13),
        ("30", "remind", "gate_timeout 30 has no unit", 12),
        ("soon", "remind", "gate_timeout 'soon' is not a duration", 12),
    ],
)
def test_wrong_deadlines_are_refused_with_their_line(timeout, action, fragment, line):
    result = load_recipe(y(LOOP.format(timeout=timeout, action=action)))
    problem = assert_error(result, fragment, line)
    assert problem.message.startswith("node 'refine': ")
    assert len(result.errors) == 1  # said once, not again by the type check


def test_on_timeout_needs_a_gate_timeout_and_a_gate():
    result = load_recipe(
        y("""
        name: t
        provider: demo
        nodes:
          - id: ship
            approval:
              message: Ship?
              on_timeout: fail
          - id: loop
            loop:
              prompt: go
              until: DONE
              max_iterations: 2
              gate_timeout: 1h
        """)
    )
    assert_error(result, "on_timeout needs a gate_timeout", 7, "nodes[0].approval.on_timeout")
    assert_warning(result, "gate_timeout only applies to a gate", 13)


PYTHON = '''"""Loop"""
from loops.python import Agent, GateOptions, LoopWorkflow

workflow = LoopWorkflow(
    [Agent("writer", "Write.", provider="demo")],
    gate=GateOptions(timeout={timeout!r}, on_timeout={action!r}),
)
'''


def test_a_python_loops_gate_option_is_checked_with_the_same_rules():
    assert parse_python(PYTHON.format(timeout="2h", action="reject")).ok
    refused = parse_python(PYTHON.format(timeout="2h", action="approve"))
    (problem,) = refused.errors
    assert problem.line == 6 and "never decides for a person" in problem.message
    (problem,) = parse_python(PYTHON.format(timeout="2 hours", action="remind")).errors
    assert problem.line == 6 and "is not a duration" in problem.message


def test_gate_options_refuse_approve_when_the_loop_is_built():
    from loops.python import GateOptions, LoopWorkflow
    from loops.python.agents import Agent

    with pytest.raises(ValueError, match="never decides for a person"):
        GateOptions(timeout="1h", on_timeout="approve")
    with pytest.raises(ValueError, match="needs a timeout"):
        GateOptions(on_timeout="reject")
    loop = LoopWorkflow([Agent("w", "x", "demo")], gate=GateOptions(timeout="45m"))
    assert loop.gate.deadline == GateDeadline(2700, "remind")
