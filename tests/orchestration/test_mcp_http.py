"""/mcp through the MCP SDK's streamable HTTP client, against uvicorn and a real worker:
an orchestrating agent reads a paused gate's structured state and finalizes it; the
decision is recorded with the token's person and the surface mcp."""

import httpx
from django.test import Client

from runs.models import Gate
from tests.conftest import wait_run
from tests.orchestration.conftest import McpHttp, token


def test_an_agent_reads_the_gate_and_finalizes_it(console_server, guided_gate, operator):
    run, gate = guided_gate
    mcp = McpHttp(console_server, token(operator, "operate"))
    assert set(mcp.tool_names()) >= {
        "list_runs",
        "list_gates",
        "get_run",
        "get_gate",
        "start_run",
        "approve",
        "reject",
        "cancel_run",
    }

    listed = mcp.call("list_gates").structured_content["gates"]
    assert [(g["run"], g["gate"]) for g in listed] == [(run.pk, gate.pk)]
    runs = mcp.call("list_runs", status="paused").structured_content["runs"]
    assert [(r["id"], r["pendingGate"]) for r in runs] == [(run.pk, gate.pk)]

    state = mcp.call("get_gate", run_id=run.pk).structured_content
    assert state["gate"] == gate.pk and state["node"] == "refine" and state["kind"] == "loop"
    assert state["iteration"] == 1 and state["maxIterations"] == 5
    assert state["completionSignaled"] is True and state["status"] == "pending"
    assert state["statusLine"] == "The agent said DONE."
    assert state["outputExcerpt"].startswith("Demo agent: iteration 1")
    assert "accept: true to finalize" in state["approve"]
    whole = mcp.call("get_run", run_id=run.pk).structured_content
    assert whole["status"] == "paused" and whole["pending_gate"]["gate"] == gate.pk

    decided = mcp.call("approve", run_id=run.pk, accept=True, gate_id=gate.pk)
    assert not decided.is_error, decided.content
    assert decided.structured_content["outcome"] == "accepted"
    assert decided.structured_content["decidedBy"] == "otto"
    assert decided.structured_content["surface"] == "mcp"

    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    gate.refresh_from_db()
    assert (gate.status, gate.decided_by, gate.surface) == ("accepted", operator, "mcp")
    decided_event = run.events.get(kind="gate_decided")
    assert decided_event.data["by"] == "otto" and decided_event.data["surface"] == "mcp"

    # The run's page says who decided, and through which surface.
    page = Client()
    page.force_login(operator)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert "by <strong>otto</strong>" in html and "via mcp" in html

    # The gate is decided: deciding it again is refused with who was first.
    late = mcp.call("approve", run_id=run.pk, accept=True, gate_id=gate.pk)
    assert late.is_error and "already decided by otto" in late.content[0].text


def test_a_viewer_token_reads_but_cannot_approve(console_server, guided_gate, viewer, operator):
    run, gate = guided_gate
    reader = McpHttp(console_server, token(viewer, "read"))
    assert reader.call("get_gate", run_id=run.pk).structured_content["gate"] == gate.pk
    refused = reader.call("approve", run_id=run.pk, accept=True)
    assert refused.is_error
    assert "scope is 'read'" in refused.content[0].text

    # An operator's read-only token cannot either; nor can a viewer's widest token.
    narrow = McpHttp(console_server, token(operator, "read")).call("reject", run_id=run.pk)
    assert narrow.is_error and "needs a token with scope 'operate'" in narrow.content[0].text
    wide = McpHttp(console_server, token(viewer, "edit")).call("cancel_run", run_id=run.pk)
    assert wide.is_error and wide.content[0].text.endswith(": Your role does not allow this.")
    gate.refresh_from_db()
    assert gate.status == Gate.Status.PENDING
    run.refresh_from_db()
    assert run.status == "paused"


def test_approve_says_what_it_needs(console_server, guided_gate, operator):
    run, gate = guided_gate
    mcp = McpHttp(console_server, token(operator))
    both = mcp.call("approve", run_id=run.pk, accept=True, feedback="shorter")
    assert both.is_error and "not both" in both.content[0].text
    nothing = mcp.call("approve", run_id=run.pk)
    assert nothing.is_error and "Nothing decided" in nothing.content[0].text
    missing = mcp.call("get_run", run_id=10**9)
    assert missing.is_error and missing.content[0].text.endswith(f": No run {10**9}.")

    # Feedback iterates: the gate is decided as iterated and iteration 2 runs.
    again = mcp.call("approve", run_id=run.pk, feedback="Mention the lighthouse.")
    assert again.structured_content["outcome"] == "iterated"
    wait_run(run, "paused", "failed")
    second = run.gates.get(status="pending")
    assert second.iteration.number == 2
    assert "Mention the lighthouse." in second.iteration.prompt


def test_bad_tokens_are_refused_before_the_mcp_server(console_server, operator, transactional_db):
    from datetime import timedelta

    from django.utils import timezone

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream"}
    url = console_server + "/mcp"

    none = httpx.post(url, json=body, headers=headers)
    assert none.status_code == 401 and none.headers["WWW-Authenticate"] == "Bearer"
    wrong = httpx.post(url, json=body, headers={**headers, "Authorization": "Bearer lc_wrong"})
    assert wrong.status_code == 401
    assert wrong.json() == {"detail": "Invalid API token: it is unknown or was revoked."}

    expired = token(operator, expires_at=timezone.now() - timedelta(minutes=1))
    answer = httpx.post(url, json=body, headers={**headers, "Authorization": f"Bearer {expired}"})
    assert answer.status_code == 401 and "expired" in answer.json()["detail"]

    from console.models import ApiToken

    revoked = token(operator)
    ApiToken.objects.get(prefix=revoked[:8]).revoke()
    answer = httpx.post(url, json=body, headers={**headers, "Authorization": f"Bearer {revoked}"})
    assert answer.status_code == 401
