"""One handoff service behind every way in: the operator's CLI, the API, the agent's
`$LOOP_HANDOFF_CMD` and the console's MCP server (spoken to directly here; the worker tests
drive `$LOOP_HANDOFF_CMD` from a real agent's shell)."""

import json

import pytest
from django.core.management import CommandError, call_command

from loops.stepmachine.handoffs import RECORD_HANDOFF
from loops.stepmachine.models import Handoff
from runs.actor import Actor
from runs.agent_tools import ToolBox, ToolContext
from runs.agent_tools.serve import serving
from tests.agent_process import call_space, relay, shell
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def box(run, role="maker") -> ToolBox:
    return ToolBox(ToolContext(run_id=run.pk, node_id=role, role=role), [RECORD_HANDOFF])


def test_the_agents_handoff_command_records_through_the_worker_socket(waiting_run, sent, tmp_path):
    with call_space(tmp_path) as space, serving(box(waiting_run), space) as env:
        assert env["LOOP_HANDOFF_CMD"].endswith(f"handoff {waiting_run.pk} --role maker")
        ok = shell(space, env, "$LOOP_HANDOFF_CMD --status completed --summary 'all $(done)'")
        other = shell(space, env, "$LOOP_HANDOFF_CMD --status completed --role checker")
        wrong_run = shell(space, env, f"{_base(env)} handoff {waiting_run.pk + 1} --status failed")
        bad = shell(space, env, "$LOOP_HANDOFF_CMD --status finished")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "completed"
    handoff = Handoff.objects.get(run=waiting_run)
    assert (handoff.role, handoff.summary, handoff.surface) == ("maker", "all $(done)", "agent")
    assert handoff.recorded_by_name == "the maker agent"
    assert handoff.content == {
        "schema": "planeai.handoff.v1",
        "role": "maker",
        "status": "completed",
        "summary": "all $(done)",
    }
    assert other.returncode == 1 and "record handoffs for your own role" in other.stdout
    assert wrong_run.returncode == 2 and f"works on run {waiting_run.pk}" in wrong_run.stderr
    assert bad.returncode == 1 and "is not one of" in bad.stdout
    assert ("stepmachine.tick_machine", (waiting_run.pk,)) in sent


def _base(env) -> str:
    return env["LOOP_TOOL_CMD"].rsplit(" tool", 1)[0]


def test_the_mcp_server_offers_record_handoff(waiting_run, sent, tmp_path):
    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18"},
        },
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {
                "name": "record_handoff",
                "arguments": {"status": "needs_human", "summary": "two findings", "data": {"n": 2}},
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "record_handoff", "arguments": {"status": "done"}},
        },
    ]
    with call_space(tmp_path) as space, serving(box(waiting_run), space) as env:
        done = relay(space, env, "mcp", stdin="".join(json.dumps(m) + "\n" for m in messages))
    assert done.returncode == 0, done.stderr
    answers = {a["id"]: a for a in map(json.loads, done.stdout.splitlines())}
    (tool,) = answers[2]["result"]["tools"]
    assert tool["name"] == "record_handoff"
    assert tool["inputSchema"]["properties"]["status"]["enum"] == [
        "completed",
        "blocked",
        "needs_human",
        "failed",
    ]
    assert answers[3]["result"]["isError"] is False
    assert answers[4]["result"]["isError"] is True
    handoff = Handoff.objects.get(run=waiting_run)
    assert (handoff.status, handoff.summary, handoff.data) == (
        "needs_human",
        "two findings",
        {"n": 2},
    )


def test_the_operators_command_records_with_data(waiting_run, viewer, tmp_path, sent, capsys):
    details = tmp_path / "details.json"
    details.write_text('{"findings": ["a", "b"]}')
    call_command(
        "loop",
        "handoff",
        str(waiting_run.pk),
        "--role",
        "maker",
        "--status",
        "blocked",
        "--summary",
        "stuck",
        "--data-file",
        str(details),
        "--user",
        "otto",
    )
    assert f"blocked on run {waiting_run.pk}" in capsys.readouterr().out
    handoff = Handoff.objects.get(run=waiting_run)
    assert (handoff.surface, handoff.recorded_by.username) == ("cli", "otto")
    assert handoff.data == {"findings": ["a", "b"]} and handoff.content["data"] == handoff.data
    for words, fragment in [
        (["--role", "maker", "--status", "done"], "status: must be one of"),
        (["--role", "nobody", "--status", "completed"], "'nobody' is not a role of this recipe"),
        (["--role", "maker", "--status", "completed", "--user", "vera"], "operator role"),
        (["--role", "maker", "--status", "completed", "--data-file", "/nope"], "cannot read"),
    ]:
        with pytest.raises(CommandError, match=fragment):
            call_command("loop", "handoff", str(waiting_run.pk), *words)


def test_the_api_records_and_lists_handoffs(waiting_run, operator, viewer, sent, bundled):
    from runs import services

    url = f"/api/runs/{waiting_run.pk}/handoffs"
    as_operator = client_for(operator)
    made = as_operator.post(url, {"role": "maker", "status": "completed", "summary": "api"})
    assert made.status_code == 201, made.body
    assert made.body["schema"] == "planeai.handoff.v1" and made.body["surface"] == "api"
    refused = as_operator.post(url, {"role": "maker", "status": "completed", "schema": "v0"})
    assert refused.status_code == 422 and "schema" in refused.body["errors"]
    assert as_operator.post(url, {"role": "maker"}).status_code == 422
    assert client_for(viewer).post(url, {"role": "maker", "status": "completed"}).status_code == 403
    listed = client_for(viewer).get(url)
    assert listed.status_code == 200 and [h["summary"] for h in listed.body] == ["api"]
    assert listed.body[0]["standing"] == "waiting to be taken"
    machine = client_for(viewer).get(f"/api/runs/{waiting_run.pk}/machine").body
    assert machine["status"] == "pending" and machine["started"] is False
    workflow = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message="m"
    )
    other = as_operator.post(
        f"/api/runs/{workflow.pk}/handoffs", {"role": "maker", "status": "completed"}
    )
    assert other.status_code == 409 and "not a step-machine run" in other.body["detail"]


def test_the_api_ticks_a_created_run_for_operators_only(
    waiting_run, operator, viewer, sent, django_capture_on_commit_callbacks
):
    url = f"/api/runs/{waiting_run.pk}/tick"
    assert client_for(viewer).post(url).status_code == 403
    with django_capture_on_commit_callbacks(execute=True):
        ticked = client_for(operator).post(url)
    assert ticked.status_code == 200 and ticked.body["current_step"] is None
    assert ("advance_run", (waiting_run.pk,)) in sent
    assert waiting_run.events.get(kind="tick_requested").data == {"by": "otto", "surface": "api"}
