"""What a script does with a token, through the real worker: start guided-refine, follow
it to its gate, ask for another pass with a comment, then accept, and read every iteration."""

from tests.api.conftest import client_for
from tests.conftest import wait_for


def follow(client, run_id, *states, timeout=60):
    def reached():
        body = client.get(f"/api/runs/{run_id}").body
        return body if body["status"] in states else None

    return wait_for(reached, timeout, message=f"run {run_id} to reach {states}")


def test_script_starts_follows_approves_and_reads(live_worker, bundled, operator):
    api = client_for(operator)

    started = api.post(
        "/api/runs",
        {"recipe": "guided-refine", "message": "the sea", "inputs": {"audience": "sailors"}},
    )
    assert started.status_code == 201, started.body
    run_id = started.body["id"]

    paused = follow(api, run_id, "paused", "failed", "completed")
    assert paused["status"] == "paused", paused
    gate = paused["pending_gate"]
    assert gate["node"] == "refine" and gate["iteration"] == 1 and gate["kind"] == "loop"
    assert gate["completion_signaled"] is True and gate["status"] == "pending"
    assert gate["message"].startswith("The agent said DONE.")
    refine = next(n for n in paused["nodes"] if n["node"] == "refine")
    assert (refine["status"], refine["iterations"], refine["max_iterations"]) == ("paused", 1, 5)

    # A comment asks for another pass even though the agent signalled completion.
    iterated = api.post(
        f"/api/runs/{run_id}/approve", {"comment": "Mention the lighthouse.", "gate": gate["id"]}
    )
    assert iterated.status_code == 200, iterated.body

    # Deciding the same gate again is a conflict that names who decided it.
    late = api.post(f"/api/runs/{run_id}/approve", {"gate": gate["id"]})
    assert late.status_code == 409 and "already decided by otto" in late.body["detail"]

    second = wait_for(
        lambda: (
            (body := api.get(f"/api/runs/{run_id}").body)["pending_gate"]
            and body["pending_gate"]["iteration"] == 2
            and body
        ),
        60,
        message="the second gate",
    )
    assert second["status"] == "paused"

    # No body: the bare approve that accepts the completed iteration.
    accepted = api.post(f"/api/runs/{run_id}/approve")
    assert accepted.status_code == 200, accepted.body
    done = follow(api, run_id, "completed", "failed")
    assert done["status"] == "completed", done
    assert done["pending_gate"] is None
    assert api.post(f"/api/runs/{run_id}/approve").status_code == 409

    iterations = api.get(f"/api/runs/{run_id}/iterations", node="refine").body
    assert [i["number"] for i in iterations["items"]] == [1, 2]
    first, again = iterations["items"]
    assert "the sea" in first["prompt"] and "sailors" in first["prompt"]
    assert "Mention the lighthouse." in again["prompt"]
    assert again["feedback"] == "Mention the lighthouse." and again["after_gate"] is True
    assert all(i["status"] == "completed" and i["output"] for i in iterations["items"])
    assert iterations["next_cursor"] is None

    events = api.get(f"/api/runs/{run_id}/events").body
    decided = [e for e in events["items"] if e["kind"] == "gate_decided"]
    assert [e["data"]["surface"] for e in decided] == ["api", "api"]
    assert [e["data"]["status"] for e in decided] == ["iterated", "accepted"]
    tail = api.get(f"/api/runs/{run_id}/events", after=events["next_after"]).body
    assert tail["items"] == [] and tail["run_status"] == "completed"
