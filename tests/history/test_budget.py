"""Budgets: validated with lines in every recipe format; 80 % warns; 100 % stops the run
as budget_exceeded between iterations, saying which limit; raising it resumes the run
where it stopped. Workflow loops, loop_groups and Python loops, and every limit."""

from datetime import timedelta

import pytest
from django.utils import timezone

from recipes.validation import validate_source
from runs import budget, services
from runs.actor import ENGINE, Actor
from runs.errors import Conflict, InputError
from runs.event_text import describe
from runs.models import Run
from tests.conftest import wait_run
from tests.engine_worker.test_gates import REFINE, gate_of
from tests.providers.conftest import FAKE_CLAUDE

from .conftest import PYTHON_LOOP, calls, iterations, node

LOOP = """
nodes:
  - id: work
    loop:
      prompt: "@*: working\\n@7: <promise>DONE</promise>"
      until: DONE
      max_iterations: 8
"""


@pytest.fixture
def actor(operator):
    return Actor.operator(operator, "api")


def test_the_workflow_format_reports_a_wrong_limit_on_its_line(db):
    result = validate_source(
        "name: b\nbudget:\n  cost_usd: free\n  tokens: 10\n  minutes: 3\nnodes:\n  - id: a\n    bash: echo\n",
        "b.yaml",
    )
    problems = {(p.path, p.line): p.message for p in result.errors}
    assert "dollars" in problems[("budget.cost_usd", 3)]
    assert "unknown limit" in problems[("budget.minutes", 5)]
    ok = validate_source(
        "name: b\nbudget: {cost_usd: 2.5, iterations: 4}\nnodes:\n  - id: a\n    bash: echo\n",
        "b.yaml",
    )
    assert ok.ok and ok.spec.budget == {"cost_usd": "2.5", "iterations": 4}


def test_the_python_format_reads_a_literal_budget_with_lines(db):
    bad = PYTHON_LOOP.replace("MAX", "3").replace("GATE", "False")
    bad = bad.replace("BUDGET", 'budget = {\n    "tokens": -1,\n}')
    result = validate_source(bad, "loop.py")
    assert not result.ok
    (problem,) = result.errors
    assert (
        problem.path == "budget.tokens"
        and problem.line == bad.splitlines().index('    "tokens": -1,') + 1
    )
    good = PYTHON_LOOP.replace("MAX", "3").replace("GATE", "False")
    good = good.replace("BUDGET", 'budget = {"iterations": 2}')
    assert validate_source(good, "loop.py").spec.budget == {"iterations": 2}


def test_iterations_limit_stops_between_iterations_then_raise_and_resume(
    live_worker, make_scripted_recipe, actor
):
    run = services.start_run(make_scripted_recipe(LOOP), actor=ENGINE, budget={"iterations": 5})
    assert run.budget == {"iterations": 5}
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded"
    assert "iterations: 5 of 5" in run.error
    # Stopped between iterations: five finished, no sixth started, nothing cut short.
    assert [it.status for it in iterations(run, "work")] == ["completed"] * 5
    assert len(calls(run)) == 5
    warned = run.events.filter(kind="budget_warning").values_list("data__limit", flat=True)
    assert list(warned) == ["iterations"]
    stop = run.events.get(kind="run_budget_exceeded")
    assert describe(stop) == "The run stopped at its budget (iterations) before its next iteration."
    with pytest.raises(Conflict, match="still over its budget"):
        services.resume_run(run, actor)
    services.set_budget(run, actor, {"iterations": 10}, resume=True)
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed", run.error
    assert [it.number for it in iterations(run, "work")] == [1, 2, 3, 4, 5, 6, 7]
    assert node(run, "work").status == "completed"


def test_a_recipe_budget_is_merged_with_the_start_budget(db, make_scripted_recipe, actor):
    made = make_scripted_recipe(LOOP, head="budget: {iterations: 2, wall_seconds: 3600}\n")
    run = services.start_run(made, actor=ENGINE, budget={"iterations": 4})
    assert run.budget == {"iterations": 4, "wall_seconds": 3600}
    with pytest.raises(InputError) as refused:
        services.start_run(made, actor=ENGINE, budget={"tokens": "many"})
    assert "budget.tokens" in refused.value.errors


def test_cost_limit_names_the_limit_and_warns_at_80_percent(live_worker, make_recipe, actor):
    source = f"""
name: costly
provider: agent
providers:
  agent: {{kind: claude, command: "{FAKE_CLAUDE}"}}
budget: {{cost_usd: 0.03}}
nodes:
  - id: work
    loop:
      prompt: "Keep going."
      until: NEVER
      max_iterations: 6
"""
    run = services.start_run(make_recipe(source, slug="costly"), actor=ENGINE)
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded", run.error
    assert "cost (USD)" in run.error and "of $0.03" in run.error
    assert len(iterations(run, "work")) == 3  # 0.0123 a call: the third crosses 0.03
    states = {s.name: s for s in budget.limits(run)}
    assert states["cost_usd"].exceeded
    warning = run.events.get(kind="budget_warning")
    assert warning.data["limit"] == "cost_usd" and warning.data["percent"] == 82


def test_a_loop_group_stops_between_group_iterations(live_worker, make_scripted_recipe, actor):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: refine
    loop_group:
      max_iterations: 5
      until: SHIPPED
      nodes:
        - id: draft
          prompt: "@*: d\\n@4: SHIPPED"
"""),
        actor=ENGINE,
        budget={"iterations": 2},
    )
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded"
    assert len(iterations(run, "refine")) == 2
    services.set_budget(run, actor, {"iterations": ""}, resume=True)  # the limit removed
    run.refresh_from_db()
    assert run.budget == {}
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed", run.error
    assert len(iterations(run, "refine")) == 4


def test_a_python_loop_stops_and_resumes_through_its_replay(live_worker, python_recipe, actor):
    run = services.start_run(
        python_recipe(max_iterations=6, budget='budget = {"iterations": 2}'),
        actor=ENGINE,
        message="Topic",
    )
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded", run.error
    assert len(iterations(run, "writer")) == 2
    services.set_budget(run, actor, {"iterations": 20})
    services.resume_run(run, actor)
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed", run.error
    assert [it.number for it in iterations(run, "writer")] == [1, 2, 3, 4]
    assert run.iterations.filter(status="completed").count() == 4


DEMO_LOOP = """
name: demo-budget
provider: demo
nodes:
  - id: work
    loop:
      prompt: "Write one more paragraph. When it is good, output: COMPLETE after 4 iterations."
      until: COMPLETE
      max_iterations: 8
"""


def test_tokens_limit_stops_between_iterations_then_raise_and_resume(
    live_worker, make_recipe, actor
):
    run = services.start_run(
        make_recipe(DEMO_LOOP, slug="demo-tokens"), actor=ENGINE, budget={"tokens": 60}
    )
    wait_run(run, "budget_exceeded", "completed", "failed")
    assert run.status == "budget_exceeded", run.error
    its = iterations(run, "work")
    spent = [it.tokens_in + it.tokens_out for it in its]
    # The iteration that crossed 60 tokens ran to its end; none was started after it.
    assert [it.status for it in its] == ["completed"] * len(its) and len(its) >= 2
    assert sum(spent[:-1]) < 60 <= sum(spent)
    assert f"tokens: {sum(spent)} of 60" in run.error
    stop = run.events.get(kind="run_budget_exceeded")
    assert stop.data["limit"] == "tokens"
    services.set_budget(run, actor, {"tokens": 100_000}, resume=True)
    wait_run(run, "completed", "failed", "budget_exceeded")
    assert run.status == "completed", run.error
    assert [it.number for it in iterations(run, "work")] == [1, 2, 3, 4]


def test_wall_seconds_limit_stops_between_iterations_then_raise_and_resume(
    live_worker, make_scripted_recipe, actor
):
    run = services.start_run(
        make_scripted_recipe(REFINE, interactive=True), actor=ENGINE, budget={"wall_seconds": 3600}
    )
    wait_run(run, "paused")
    # Two hours pass while the gate waits (written, not waited for): the next iteration the
    # feedback asks for must not start.
    Run.objects.filter(pk=run.pk).update(started_at=timezone.now() - timedelta(hours=2))
    services.approve(gate_of(run).pk, actor, comment="make it shorter")
    run.refresh_from_db()
    assert run.status == "budget_exceeded"
    assert "wall-clock seconds: 7,200 of 3,600" in run.error
    assert [it.number for it in iterations(run, "refine")] == [1]
    services.set_budget(run, actor, {"wall_seconds": 86_400}, resume=True)
    second = gate_of(run)  # waits for the gate after the resumed iteration
    second_iteration = iterations(run, "refine")[1]
    assert second.iteration_id == second_iteration.pk
    assert second_iteration.feedback == "make it shorter"  # the held feedback went on


@pytest.mark.django_db
def test_a_finished_runs_wall_time_stopped_with_it(make_scripted_recipe):
    """A run that ended an hour ago spent the time it ran, not the time since it started."""
    run = services.start_run(
        make_scripted_recipe(REFINE, interactive=True), actor=ENGINE, budget={"wall_seconds": 900}
    )
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status="completed",
        started_at=now - timedelta(hours=2),
        finished_at=now - timedelta(hours=1),
    )
    run.refresh_from_db()
    [wall] = budget.limits(run)
    assert wall.spent == 3600 and wall.flag == "all used" and not wall.exceeded
