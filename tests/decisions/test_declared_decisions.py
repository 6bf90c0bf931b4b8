"""Declared decisions on every gate, answered by id through one verb (`respond`) from the
console, the API, the CLI and MCP, through a real worker: each decision routes to its
branch (`$gate.output.decision`, and the plain `$gate.output == 'id'`); an unknown id is
refused with the list; a text a decision needs is asked for; every answer is audited."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from recipes.validation import validate_source
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import GateResponse
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for, wait_run
from tests.orchestration.conftest import McpHttp, token

pytestmark = pytest.mark.usefixtures("live_worker")

THREE_WAYS = """
name: three ways
nodes:
  - id: decide
    approval:
      message: Which way?
      decisions:
        - {id: ship, label: Ship it}
        - {id: hold, label: Hold, text_required: true}
        - {id: redo, label: Start over}
  - id: shipped
    depends_on: [decide]
    when: "$decide.output.decision == 'ship'"
    bash: echo shipping
  - id: held
    depends_on: [decide]
    when: "$decide.output.decision == 'hold'"
    bash: echo held
  - id: redone
    depends_on: [decide]
    when: "$decide.output == 'redo'"
    bash: echo starting over
"""


def started(make_recipe):
    run = services.start_run(make_recipe(THREE_WAYS, slug="three-ways"), ENGINE, message="v2")
    return run, wait_for(lambda: pending_gate(run), message="the gate")


def branches(run) -> dict[str, str]:
    wait_run(run, "completed", "failed", "cancelled")
    return {row.node_id: row.status for row in run.nodes.all()}


def test_the_console_routes_a_decision_to_its_branch(make_recipe, operator, client):
    run, gate = started(make_recipe)
    client.force_login(operator)
    page = client.get(f"/runs/{run.pk}/gates/{gate.pk}/").content.decode()
    for label in ("Ship it", "Hold", "Start over", "Reject"):
        assert f">{label}</button>" in page
    url = f"/runs/{run.pk}/gates/{gate.pk}/respond/"
    refused = client.post(url, {"decision": "hold", "text": "", "digest": gate.digest}, follow=True)
    assert "“Hold” needs a text" in refused.content.decode()
    assert pending_gate(run) is not None
    client.post(url, {"decision": "hold", "text": "wait for legal", "digest": gate.digest})
    assert branches(run) == {
        "decide": "completed",
        "shipped": "skipped",
        "held": "completed",
        "redone": "skipped",
    }
    answer = GateResponse.objects.get(gate=gate)
    assert (answer.decision, answer.text, answer.by_name, answer.via) == (
        "hold",
        "wait for legal",
        operator.username,
        "console",
    )
    assert answer.digest == gate.digest and answer.closed_gate


def test_the_api_refuses_an_unknown_id_with_the_list_then_routes(make_recipe, operator):
    run, gate = started(make_recipe)
    api = client_for(operator)
    shown = api.get(f"/api/runs/{run.pk}").body["pending_gate"]
    assert [d["id"] for d in shown["offered_decisions"]] == ["ship", "hold", "redo", "reject"]
    assert shown["digest"] == gate.digest
    refused = api.post(f"/api/runs/{run.pk}/respond", {"decision": "merge"})
    assert refused.status_code == 422
    assert "choose one of: ship, hold, redo, reject" in refused.body["detail"]
    answered = api.post(f"/api/runs/{run.pk}/respond", {"decision": "ship", "digest": gate.digest})
    assert answered.status_code == 200, answered.body
    assert branches(run)["shipped"] == "completed"
    event = run.events.get(kind="gate_decided")
    assert event.data["answered"] == "ship" and event.data["surface"] == "api"


def test_the_cli_responds_by_id(make_recipe, operator):
    run, _gate = started(make_recipe)
    call_command("run", "respond", str(run.pk), "redo", "--user", operator.username)
    assert branches(run) == {
        "decide": "completed",
        "shipped": "skipped",
        "held": "skipped",
        "redone": "completed",
    }
    assert GateResponse.objects.get(run=run).via == "cli"


def test_mcp_responds_by_id(make_recipe, operator, console_server):
    run, _gate = started(make_recipe)
    mcp = McpHttp(console_server, token(operator))
    answer = mcp.call("respond", run_id=run.pk, decision="ship")
    assert not answer.is_error, answer
    assert answer.structured_content["result"]["decision"] == "ship"
    assert branches(run)["shipped"] == "completed"
    assert GateResponse.objects.get(run=run).via == "mcp"


LOOP_DECISIONS = """
name: drafted
interactive: true
provider: agent
model: fake-model
providers:
  agent: {{kind: openai, base_url: "{url}", api_key_env: FAKE_PROVIDER_KEY}}
nodes:
  - id: draft
    loop:
      prompt: "Draft it."
      until: DONE
      max_iterations: 4
      interactive: true
      gate_message: Read the draft.
      decisions:
        - {{id: good, label: Good, then: complete}}
        - {{id: again, label: Once more, then: iterate, text_required: true}}
        - {{id: scrap, label: Scrap it, then: fail, text_required: true}}
  - id: publish
    depends_on: [draft]
    when: "$draft.output.decision == 'good'"
    bash: echo publishing
"""


def test_a_loop_gate_declares_what_completes_iterates_or_fails(make_recipe, operator, fake_ai):
    fake_ai.answers = ["A first draft.", "Better.\n<promise>DONE</promise>"]
    source = LOOP_DECISIONS.format(url=fake_ai.url + "/v1")
    run = services.start_run(make_recipe(source, slug="drafted"), ENGINE, message="go")
    me = Actor.operator(operator, "api")
    first = wait_for(lambda: pending_gate(run), message="the first gate")
    assert [d["then"] for d in first.offered_decisions] == ["complete", "iterate", "fail"]
    with pytest.raises(services.ServiceError, match="“Once more” needs a text"):
        services.respond(first.pk, me, "again")
    with pytest.raises(services.ServiceError, match="respond with one of good, again, scrap"):
        services.approve(first.pk, me)
    services.respond(first.pk, me, "again", text="Add a conclusion.")
    second = wait_for(
        lambda: (g := pending_gate(run)) is not None and g.pk != first.pk and g,
        message="the second gate",
    )
    assert second.iteration.feedback == "Add a conclusion."
    services.respond(second.pk, me, "good", digest=second.digest)
    wait_run(run, "completed", "failed", "cancelled")
    assert run.status == "completed", run.error
    rows = {row.node_id: row for row in run.nodes.all()}
    assert rows["publish"].status == "completed"
    assert rows["draft"].output.startswith("Better.")  # the iteration's answer, unchanged


def test_an_unattended_recipe_may_not_contain_a_gate():
    source = THREE_WAYS.replace("name: three ways", "name: nightly\nunattended: true")
    result = validate_source(source)
    (problem,) = [p for p in result.errors if "unattended" in p.message]
    assert problem.line == 5  # the gate node's own line
    assert "node 'decide' is an approval, a gate" in problem.message
