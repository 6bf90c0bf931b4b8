"""GET /api/runs/{id}/wait: a long-poll that answers when the run needs a person or ends (the
same words as `manage.py run wait` and the MCP tool: runs/waiting.py), against a real
worker; and, served by uvicorn, long-polls that do not hold the web process's pooled
database connections while they wait."""

from __future__ import annotations

import httpx

from console.models import ApiToken
from runs import services
from runs.actor import Actor
from tests.api.conftest import client_for
from tests.conftest import pending_gate
from tests.console.run_waits import HeldRun, InThread, wait_for_listeners


def test_the_long_poll_answers_at_the_gate_then_at_the_end(live_worker, bundled, operator, viewer):
    held = HeldRun(bundled["guided-refine"], operator)
    run = held.run
    reader = client_for(viewer)  # reading a run is enough
    poll = InThread(lambda: reader.get(f"/api/runs/{run.pk}/wait", timeout=60))
    wait_for_listeners(run.pk)
    held.release()

    at_gate = poll.result()
    assert at_gate.status_code == 200, at_gate.body
    assert at_gate.body["state"] == "needs_person"
    assert at_gate.body["reason"] == "the gate at refine waits for a decision"
    shown = at_gate.body["run"]  # as GET /api/runs/{id} shows it
    assert shown["id"] == run.pk and shown["status"] == "paused"
    assert shown["pending_gate"]["node"] == "refine"
    assert "The agent said DONE." in shown["pending_gate"]["message"]
    assert shown["url"].endswith(f"/runs/{run.pk}/")

    services.approve(pending_gate(run).pk, Actor.operator(operator, "console"))
    done = reader.get(f"/api/runs/{run.pk}/wait", timeout=60)
    assert done.status_code == 200, done.body
    assert (done.body["state"], done.body["reason"]) == ("completed", "finished")
    assert done.body["run"]["status"] == "completed"
    assert done.body["run"]["pending_gate"] is None


def test_the_timeout_answers_running(transactional_db, bundled, operator, viewer):
    run = HeldRun(bundled["guided-refine"], operator).run  # nothing moves it
    answer = client_for(viewer).get(f"/api/runs/{run.pk}/wait", timeout=0)
    assert answer.status_code == 200
    assert (answer.body["state"], answer.body["reason"]) == (
        "running",
        "still pending after 0 s",
    )
    assert answer.body["run"]["status"] == "pending"


def test_a_cancelled_run_ended(transactional_db, bundled, operator, viewer):
    run = HeldRun(bundled["guided-refine"], operator).run
    poll = InThread(lambda: client_for(viewer).get(f"/api/runs/{run.pk}/wait", timeout=60))
    wait_for_listeners(run.pk)
    services.cancel_run(run, Actor.operator(operator, "console"), reason="not needed")
    answer = poll.result()
    assert answer.status_code == 200
    assert (answer.body["state"], answer.body["reason"]) == ("ended", "not needed")


def test_refusals(transactional_db, bundled, operator, viewer, outsider):
    run = HeldRun(bundled["guided-refine"], operator).run
    reader = client_for(viewer)
    assert reader.get(f"/api/runs/{run.pk + 1000}/wait", timeout=0).status_code == 404
    assert client_for(outsider).get(f"/api/runs/{run.pk}/wait", timeout=0).status_code == 403
    too_long = reader.get(f"/api/runs/{run.pk}/wait", timeout=61)
    assert too_long.status_code == 422 and "timeout" in too_long.body["detail"]
    misspelt = reader.get(f"/api/runs/{run.pk}/wait", timout=1)
    assert misspelt.status_code == 422
    assert misspelt.body["detail"].startswith("Unknown query parameter: timout.")


def test_the_schema_says_the_states_and_the_limits(transactional_db, viewer):
    schema = client_for(viewer).get("/api/openapi.json").body
    route = schema["paths"]["/api/runs/{run_id}/wait"]["get"]
    assert "at most 60" in route["description"]
    timeout = next(p for p in route["parameters"] if p["name"] == "timeout")
    assert (timeout["schema"]["default"], timeout["schema"]["maximum"]) == (30, 60)
    out = schema["components"]["schemas"]["RunWaitOut"]["properties"]["state"]
    assert out["enum"] == ["completed", "ended", "needs_person", "running"]


def test_long_polls_give_their_pooled_connection_back_while_they_wait(
    console_server, transactional_db, bundled, operator, viewer
):
    """More long-polls than the web process's pool has connections (LOOP_DB_POOL_SIZE, 8
    here) all listen at once, and a cancel still gets through and ends each of them."""
    run = HeldRun(bundled["guided-refine"], operator).run
    _, reading = ApiToken.issue(viewer, name="polls", scope="read")
    _, operating = ApiToken.issue(operator, name="cancel", scope="operate")

    def poll():
        return httpx.get(
            f"{console_server}/api/runs/{run.pk}/wait",
            params={"timeout": 60},
            headers={"Authorization": f"Bearer {reading}"},
            timeout=120,
        )

    polls = [InThread(poll) for _ in range(10)]
    wait_for_listeners(run.pk, count=10)
    cancelled = httpx.post(
        f"{console_server}/api/runs/{run.pk}/cancel",
        headers={"Authorization": f"Bearer {operating}"},
        timeout=60,
    )
    assert cancelled.status_code == 200, cancelled.text
    answers = [p.result() for p in polls]
    assert [(a.status_code, a.json()["state"]) for a in answers] == [(200, "ended")] * 10
