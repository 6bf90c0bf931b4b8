"""A Python loop on the kernel's transitions: a cancel that races an agent call's finish,
or a person's decision at a script's gate, wins the same way a YAML loop's cancel does."""

from __future__ import annotations

import asyncio
import threading

import pytest

from loops.python import RunCancelled
from runs import services
from runs.actor import Actor
from runs.errors import AlreadyDecided
from runs.models import Iteration, NodeRun, Run
from tests.conftest import pending_gate, wait_for
from tests.python.scripted import ScriptedProvider, run_async
from tests.python.test_gates import gated_source, import_file

ONE_AGENT = '''"""One agent"""
from loops.python import Agent, LoopWorkflow

workflow = LoopWorkflow([Agent("writer", "Write.", provider="demo")], max_iterations=3)
'''


def test_a_cancel_during_a_python_agent_call_beats_its_finish(transactional_db, tmp_path, operator):
    path = tmp_path / "racing_cancel.py"
    path.write_text(ONE_AGENT)
    module = import_file(path, "racing_cancel")

    def answer(request, count):
        # The person cancels while the agent is still answering its first call.
        services.cancel_run(Run.objects.get(), Actor.operator(operator, "console"))
        return "an answer that arrives too late"

    module.workflow.stages[0].provider = ScriptedProvider(answer)
    try:
        with pytest.raises(RunCancelled):
            run_async(module.workflow.run("Write copy"))
    finally:
        import sys

        sys.modules.pop("racing_cancel", None)
    run = Run.objects.get()
    assert run.status == "cancelled" and run.error == "cancelled by otto"
    (it,) = Iteration.objects.filter(run=run)
    assert it.status == "cancelled"  # the late answer did not complete it
    assert not run.events.filter(kind="iteration_completed").exists()
    assert set(NodeRun.objects.filter(run=run).values_list("status", flat=True)) == {"cancelled"}


def test_a_cancel_wins_over_a_decision_at_a_scripts_gate(transactional_db, tmp_path, operator):
    path = tmp_path / "racing_gate.py"
    path.write_text(gated_source())
    module = import_file(path, "racing_gate")
    outcome = {}

    def script():
        try:
            outcome["result"] = asyncio.run(module.workflow.run("Write copy"))
        except Exception as exc:  # noqa: BLE001 - asserted below
            outcome["error"] = exc

    thread = threading.Thread(target=script)
    thread.start()
    try:
        run = wait_for(lambda: Run.objects.first(), 60, message="the script's run")
        gate = wait_for(lambda: pending_gate(run), 60, message="the script's gate")
        services.cancel_run(run, Actor.operator(operator, "console"))
        with pytest.raises(AlreadyDecided):
            services.approve(gate.pk, Actor.operator(operator, "console"))
        # The waiting script wakes on the cancel and stops: no worker, no poll window.
        thread.join(120)
    finally:
        import sys

        sys.modules.pop("racing_gate", None)
    assert not thread.is_alive()
    assert type(outcome.get("error")).__name__ == "RunCancelled", outcome
    run.refresh_from_db()
    gate.refresh_from_db()
    assert run.status == "cancelled" and gate.status == "cancelled"
    assert gate.decider == "otto"
    assert not run.events.filter(kind="gate_decided").exists()
    workflow = NodeRun.objects.get(run=run, node_id="workflow")
    assert workflow.status == "cancelled"
