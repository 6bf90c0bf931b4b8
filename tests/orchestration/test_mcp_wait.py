"""The MCP tool `wait_for_run` over streamable HTTP (uvicorn, a real worker): it answers when
the run needs a person or ends, with the API's long-poll's words (runs/waiting.py)."""

from __future__ import annotations

from runs import services
from runs.actor import Actor
from tests.conftest import pending_gate
from tests.console.run_waits import HeldRun, InThread, wait_for_listeners
from tests.orchestration.conftest import McpHttp, token


def test_an_agent_waits_for_the_gate_then_for_the_end(
    console_server, live_worker, bundled, operator, viewer
):
    held = HeldRun(bundled["guided-refine"], operator)
    run = held.run
    mcp = McpHttp(console_server, token(viewer, "read"))  # a read: the viewer role is enough
    assert "wait_for_run" in mcp.tool_names()
    call = InThread(lambda: mcp.call("wait_for_run", run_id=run.pk, timeout_seconds=60))
    wait_for_listeners(run.pk)
    held.release()

    at_gate = call.result()
    assert not at_gate.is_error, at_gate.content
    answer = at_gate.structured_content
    assert answer["state"] == "needs_person"
    assert answer["reason"] == "the gate at refine waits for a decision"
    gate = pending_gate(run)
    # The run as get_run gives it: its pending gate's structured state.
    assert answer["run"]["status"] == "paused"
    assert answer["run"]["pending_gate"]["gate"] == gate.pk
    assert answer["run"]["pending_gate"]["completionSignaled"] is True

    services.approve(gate.pk, Actor.operator(operator, "console"))
    ended = mcp.call("wait_for_run", run_id=run.pk, timeout_seconds=60).structured_content
    assert (ended["state"], ended["reason"]) == ("completed", "finished")
    assert ended["run"]["status"] == "completed" and ended["run"]["pending_gate"] is None


def test_its_refusals(console_server, transactional_db, bundled, operator, viewer):
    run = HeldRun(bundled["guided-refine"], operator).run
    mcp = McpHttp(console_server, token(viewer, "read"))
    still = mcp.call("wait_for_run", run_id=run.pk, timeout_seconds=0).structured_content
    assert (still["state"], still["reason"]) == ("running", "still pending after 0 s")
    unknown = mcp.call("wait_for_run", run_id=run.pk + 1000, timeout_seconds=0)
    assert unknown.is_error and unknown.content[0].text.endswith(f"No run {run.pk + 1000}.")
    too_long = mcp.call("wait_for_run", run_id=run.pk, timeout_seconds=61)
    assert too_long.is_error and "timeout_seconds" in too_long.content[0].text
