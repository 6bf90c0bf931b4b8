"""A gate in a Python loop: the run waits in the inbox, feedback reaches the next
iteration, accept ends the loop, reject fails it; cancel stops it. From a worker (which
suspends at the gate) and from a script (which waits for the decision)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading

import pytest

from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Gate, Iteration, Run
from tests.conftest import pending_gate, wait_for, wait_run

GATED = '''"""Gated writer and reviewer"""
from pydantic import BaseModel

from loops.python import Agent, LoopWorkflow, score_at_least


class Review(BaseModel):
    content: str
    score: int
    feedback: str


workflow = LoopWorkflow(
    [
        Agent("writer", "Write.", provider="PROVIDER"),
        Agent("reviewer", "Score it.", provider="PROVIDER", output_type=Review),
    ],
    stop_condition=score_at_least("score", 80),
    max_iterations=5,
    gate=True,
)
'''


def gated_source(provider="demo") -> str:
    return GATED.replace("PROVIDER", provider)


@pytest.fixture
def gated_recipe(tmp_path):
    def make(provider="demo", slug="gated-loop"):
        path = tmp_path / f"{slug.replace('-', '_')}.py"
        path.write_text(gated_source(provider))
        recipe, _ = create_recipe(
            path.read_text(), slug=slug, origin=Recipe.Origin.PROJECT, source_path=str(path)
        )
        return recipe

    return make


def pending(run: Run) -> Gate:
    return wait_for(lambda: pending_gate(run), 60, message="a pending gate")


def writer_prompt(run: Run, number: int) -> str:
    return Iteration.objects.get(run=run, node_id="writer", number=number).prompt


def test_feedback_then_accept_from_the_console(live_worker, gated_recipe, operator):
    run = services.start_run(gated_recipe(), actor=ENGINE, message="Write copy")
    try:
        wait_run(run, "paused", "failed", timeout=20)
    except AssertionError:
        print([(e.kind, e.step, e.data) for e in run.events.all()])
        print(list(run.nodes.values_list("node_id", "status", "error")))
        raise
    first = pending(run)
    assert (first.node_id, first.iteration_number) == ("reviewer", 1)
    assert first.completion_signaled  # so an empty approve reads "Accept & complete"
    assert run.nodes.get(node_id="workflow").status == "paused"  # no worker is held

    services.approve(first.pk, Actor.operator(operator, "console"), comment="MORE-PUNCH")
    second = wait_for(lambda: run.gates.filter(status="pending").exclude(pk=first.pk).first(), 60)
    assert second.iteration_number == 2
    assert "MORE-PUNCH" in writer_prompt(run, 2) and "MORE-PUNCH" not in writer_prompt(run, 1)
    services.approve(second.pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert run.events.get(kind="run_completed").data["ended"] == "accepted"
    # The replays after each decision re-ran nothing that was recorded.
    assert all(it.attempts == 1 for it in Iteration.objects.filter(run=run))
    assert Iteration.objects.filter(run=run).count() == 4
    assert run.events.filter(kind="python_iteration_checked").count() == 2


def test_reject_fails_the_run_with_the_reason(live_worker, gated_recipe, operator):
    run = services.start_run(gated_recipe(), actor=ENGINE, message="Write copy")
    services.reject(pending(run).pk, Actor.operator(operator, "console"), reason="off brand")
    wait_run(run, "failed", "completed")
    assert run.status == "failed"
    assert "rejected at the gate after iteration 1 by otto: off brand" in run.error


def test_cancel_while_waiting_at_the_gate(live_worker, gated_recipe, operator):
    run = services.start_run(gated_recipe(), actor=ENGINE, message="Write copy")
    gate = pending(run)
    services.cancel_run(run, Actor.operator(operator, "console"))
    run.refresh_from_db()
    gate.refresh_from_db()
    assert run.status == "cancelled" and gate.status == "cancelled"
    assert run.nodes.get(node_id="workflow").status == "cancelled"


def test_cancel_stops_an_agent_mid_call(live_worker, gated_recipe, operator):
    from runs.models import ProviderConfig

    ProviderConfig.objects.create(name="slow-demo", kind="demo", options={"delay": 0.3})
    run = services.start_run(
        gated_recipe("slow-demo", "slow-gated"), actor=ENGINE, message="Write copy"
    )
    wait_for(
        lambda: Iteration.objects.filter(run=run, status="running").exclude(raw_output="").first(),
        60,
        message="a streaming iteration",
    )
    services.cancel_run(run, Actor.operator(operator, "console"))
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert list(Iteration.objects.filter(run=run).values_list("status", flat=True)) == ["cancelled"]
    assert run.nodes.get(node_id="workflow").status == "cancelled"


def import_file(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_a_script_waits_at_the_gate_for_the_decision(transactional_db, tmp_path, operator):
    path = tmp_path / "scripted_gate.py"
    path.write_text(gated_source())
    module = import_file(path, "scripted_gate")
    outcome = {}

    def script():
        outcome["result"] = asyncio.run(module.workflow.run("Write copy"))

    thread = threading.Thread(target=script)
    thread.start()
    try:
        run = wait_for(lambda: Run.objects.first(), 60, message="the script's run")
        first = pending(run)
        run.refresh_from_db()
        assert run.status == "paused" and run.recipe.slug == "scripted-gate"
        assert run.recipe.kind == "python"
        services.approve(first.pk, Actor.operator(operator, "console"), comment="MORE-PUNCH")
        second = wait_for(
            lambda: run.gates.filter(status="pending").exclude(pk=first.pk).first(), 60
        )
        services.approve(second.pk, Actor.operator(operator, "console"))
    finally:
        thread.join(120)
        sys.modules.pop("scripted_gate", None)
    result = outcome["result"]
    assert result.status == "accepted" and result.iterations == 2
    assert "MORE-PUNCH" in writer_prompt(run, 2)
    run.refresh_from_db()
    assert run.status == "completed"
