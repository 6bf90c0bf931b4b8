"""`manage.py run wait RUN`: blocks until the run needs a person or ends, shows it as `run
status` does, and says which in its exit status (runs/waiting.py: EXIT_CODES). Run as a
script would, a process of its own, against a real worker."""

from __future__ import annotations

import json
import subprocess
import sys

from runs import services, waiting
from runs.actor import Actor
from runs.models import Run
from tests.conftest import ROOT, pending_gate, wait_run
from tests.console.run_waits import HeldRun, wait_for_listeners


def start_wait(worker_env, run_id: int, *options: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "manage.py", "run", "wait", str(run_id), *options],
        cwd=ROOT,
        env=worker_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finished(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=240)
    return proc.returncode, out, err


def test_the_exit_codes_are_distinct_and_documented():
    assert len(set(waiting.EXIT_CODES.values())) == len(waiting.STATES)
    assert not {1, 2} & set(waiting.EXIT_CODES.values())  # a refusal, a usage error
    readme = (ROOT / "README.md").read_text()
    for state, code in waiting.EXIT_CODES.items():
        assert f"| {code} | `{state}`" in readme, state


def test_wait_returns_when_a_gate_opens_then_when_the_run_ends(
    live_worker, worker_env, bundled, operator
):
    held = HeldRun(bundled["guided-refine"], operator)
    run = held.run
    waiting_at_gate = start_wait(worker_env, run.pk)
    wait_for_listeners(run.pk)  # the wait listens before the run has even started
    held.release()

    code, out, err = finished(waiting_at_gate)
    assert code == waiting.EXIT_CODES["needs_person"], out + err
    assert "The agent said DONE." in out  # the gate's message, as `run status` shows it
    assert f"Accept & complete: manage.py run respond {run.pk} accept" in out
    assert f"Iterate with feedback: manage.py run respond {run.pk} feedback --text TEXT" in out
    assert out.rstrip().endswith("needs_person: the gate at refine waits for a decision")
    run.refresh_from_db()
    assert run.status == Run.Status.PAUSED

    # Already waiting for a person: it answers at once, the same way.
    again = start_wait(worker_env, run.pk, "--json")
    code, out, err = finished(again)
    assert code == waiting.EXIT_CODES["needs_person"], err
    assert json.loads(out)["pending_gate"]["node"] == "refine"

    services.approve(pending_gate(run).pk, Actor.operator(operator, "console"))
    to_the_end = start_wait(worker_env, run.pk, "--json")
    code, out, err = finished(to_the_end)
    assert code == 0, out + err
    shown = json.loads(out)  # exactly what `run status --json` prints
    assert shown["status"] == "completed" and shown["pending_gate"] is None
    assert {n["node"]: n["status"] for n in shown["nodes"]} == {
        "refine": "completed",
        "publish": "completed",
    }


def test_a_cancelled_run_ends_the_wait_with_the_ended_code(
    live_worker, worker_env, bundled, operator
):
    run = HeldRun(bundled["guided-refine"], operator).run
    proc = start_wait(worker_env, run.pk)
    wait_for_listeners(run.pk)
    services.cancel_run(run, Actor.operator(operator, "console"), reason="not needed")

    code, out, err = finished(proc)
    assert code == waiting.EXIT_CODES["ended"], out + err
    assert out.startswith(f"run {run.pk}: cancelled — not needed")
    assert out.rstrip().endswith("ended: not needed")


def test_a_failed_run_gives_the_ended_code_with_its_error(
    live_worker, worker_env, make_recipe, operator
):
    recipe = make_recipe(
        "name: fails\nnodes:\n  - id: boom\n    bash: |\n      echo broken >&2\n      exit 3\n",
        slug="fails",
    )
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"))
    code, out, err = finished(start_wait(worker_env, run.pk))
    wait_run(run, "failed", "completed")
    assert run.status == Run.Status.FAILED
    assert code == waiting.EXIT_CODES["ended"], out + err
    assert f"ended: {run.error}" in out


def test_the_timeout_passing_gives_the_running_code(
    worker_env, transactional_db, bundled, operator
):
    run = HeldRun(bundled["guided-refine"], operator).run  # nothing moves it: it stays pending
    code, out, err = finished(start_wait(worker_env, run.pk, "--timeout", "0.5"))
    assert code == waiting.EXIT_CODES["running"], out + err
    assert out.rstrip().endswith("running: still pending after 0.5 s")


def test_a_refusal_is_exit_1_and_json_with_json(worker_env, transactional_db, bundled, operator):
    code, out, err = finished(start_wait(worker_env, 999999, "--json"))
    assert code == 1 and json.loads(out) == {"detail": "No run 999999"}
    run = HeldRun(bundled["guided-refine"], operator).run
    code, out, err = finished(start_wait(worker_env, run.pk, "--timeout", "-1"))
    assert code == 1 and "--timeout: give 0 or more seconds" in err
    code, out, err = finished(start_wait(worker_env, run.pk, "--timout", "5"))
    assert code == 2 and "unrecognized arguments: --timout" in err  # argparse's usage error


def test_the_states_and_their_reasons(db, guided_run, gated_run):
    """`state_of`, the one rule of every surface's wait, on rows made by hand."""
    run, gate = gated_run
    assert waiting.state_of(run) == ("needs_person", "the gate at refine waits for a decision")
    gate.status = "accepted"
    gate.save()
    # Paused with no gate waiting (a decision recorded for later): a person resumes it.
    assert waiting.state_of(run) == ("needs_person", "waiting for a decision at a gate")
    run.status, run.error = "budget_exceeded", "Stopped by its budget: iterations: 5 of 5."
    assert waiting.state_of(run) == ("needs_person", run.error)
    run.status, run.error = "running", ""
    assert waiting.state_of(run) == ("running", "working")
    run.status, run.error = "failed", "node 'refine' failed: the agent crashed"
    assert waiting.state_of(run) == ("ended", run.error)
    run.status, run.error = "cancelled", ""
    assert waiting.state_of(run) == ("ended", "stopped by a person")
    run.status = "completed"
    assert waiting.state_of(run) == ("completed", "finished")
