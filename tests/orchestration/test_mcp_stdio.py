"""`manage.py mcp --user NAME` through the MCP SDK's stdio client: the same tools, acting
as that account with its role."""

import subprocess
import sys

from runs.models import Gate
from tests.conftest import ROOT, wait_run
from tests.orchestration.conftest import stdio_calls, stdio_parameters


def test_stdio_acts_as_the_user_it_is_given(guided_gate, operator, viewer, worker_env):
    run, gate = guided_gate

    as_viewer = stdio_parameters(worker_env, "--user", "vera")
    state, refused = stdio_calls(
        as_viewer,
        [("get_gate", {"run_id": run.pk}), ("approve", {"run_id": run.pk, "accept": True})],
    )
    assert state.structured_content["gate"] == gate.pk
    assert state.structured_content["completionSignaled"] is True
    assert refused.is_error and refused.content[0].text.endswith("Your role does not allow this.")
    gate.refresh_from_db()
    assert gate.status == Gate.Status.PENDING

    as_operator = stdio_parameters(worker_env, "--user", "otto")
    [gates, decided] = stdio_calls(
        as_operator,
        [("list_gates", {}), ("approve", {"run_id": run.pk, "accept": True, "gate_id": gate.pk})],
    )
    assert [g["gate"] for g in gates.structured_content["gates"]] == [gate.pk]
    assert decided.structured_content["outcome"] == "accepted"
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    gate.refresh_from_db()
    assert (gate.decided_by, gate.surface) == (operator, "mcp")


def test_stdio_starts_and_cancels_a_run(live_worker, bundled, operator, worker_env):
    from runs.models import Run

    as_operator = stdio_parameters(worker_env, "--user", "otto")
    [started] = stdio_calls(
        as_operator, [("start_run", {"recipe": "guided-refine", "message": "a haiku"})]
    )
    assert not started.is_error, started.content
    run = Run.objects.get(pk=started.structured_content["id"])
    assert run.started_by == operator and run.message == "a haiku"
    assert run.events.get(kind="run_created").data["surface"] == "mcp"

    [cancelled, unknown] = stdio_calls(
        as_operator,
        [
            ("cancel_run", {"run_id": run.pk, "reason": "not needed"}),
            ("start_run", {"recipe": "no-such-recipe"}),
        ],
    )
    assert cancelled.structured_content["runStatus"] == "cancelled"
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert unknown.is_error and unknown.content[0].text.endswith("No recipe 'no-such-recipe'.")


def test_an_unknown_user_stops_the_command(worker_env, transactional_db):
    done = subprocess.run(
        [sys.executable, "manage.py", "mcp", "--user", "nobody"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    assert done.returncode != 0
    assert "No active user 'nobody'" in done.stderr
