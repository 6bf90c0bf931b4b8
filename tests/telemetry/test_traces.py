"""Runs as OpenTelemetry traces (runs/telemetry.py): a run with a loop and its gates, run by
a real worker against the scripted OpenAI-compatible API, arrives at a real OTLP/HTTP
receiver as one trace with the run's, nodes', iterations' and gates' spans; without an
endpoint nothing is made or sent."""

from __future__ import annotations

import pytest
from django.test import RequestFactory

from runs import services, telemetry
from runs.actor import Actor
from runs.models import Iteration
from tests.conftest import pending_gate, wait_for, wait_run
from tests.telemetry.conftest import HEADER


def recipe(url: str) -> str:
    return f"""
name: traced
provider: agent
model: fake-model
providers:
  agent: {{kind: openai, base_url: "{url}", api_key_env: FAKE_PROVIDER_KEY, price_in: 1000, price_out: 2000}}
nodes:
  - id: work
    loop:
      prompt: "Draft it."
      until: DONE
      max_iterations: 3
      interactive: true
      gate_message: Read the draft.
  - id: wrap
    depends_on: [work]
    prompt: "Sum it up."
"""


def decide_both_gates(run, who) -> None:
    """Ask for more at the first gate, accept at the second (the draft said DONE)."""
    first = wait_for(lambda: pending_gate(run), message="the first gate")
    services.approve(first.pk, Actor.operator(who, "console"), comment="Add a conclusion.")
    second = wait_for(
        lambda: (gate := pending_gate(run)) is not None and gate.pk != first.pk and gate,
        message="the second gate",
    )
    services.approve(second.pk, Actor.operator(who, "console"))


def whole_trace(receiver, trace: str, count: int):
    """The trace's spans once `count` of them and the run's have arrived."""

    def arrived():
        spans = receiver.of_trace(trace)
        return len(spans) >= count and any(s.name.startswith("run ") for s in spans) and spans

    return wait_for(arrived, message=f"{count} spans of trace {trace} at the receiver")


@pytest.mark.worker
def test_a_run_with_a_gate_arrives_as_one_trace(
    tracing_worker, start, fake_ai, receiver, operator, client, monkeypatch
):
    fake_ai.answers = ["A first draft.", "The final draft.\n<promise>DONE</promise>", "Done."]
    run = start(recipe(fake_ai.url + "/v1"))
    decide_both_gates(run, operator)
    wait_run(run, "completed", "failed", "cancelled")
    assert run.status == "completed", run.error
    trace = telemetry.trace_id(run)
    # run, 2 nodes, 3 agent calls (2 of the loop, the prompt step's), 2 gates
    spans = whole_trace(receiver, trace, 8)
    assert {s.trace_id for s in receiver.spans} == {trace}  # one trace, nothing else
    name, value = HEADER.split("=")
    assert all(headers.get(name) == value for headers in receiver.headers)
    assert "parts" not in telemetry._made  # the worker sent them, not this process

    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "run provider-test" and root.resource["service.name"] == "loop-console"
    assert root.attributes["loop.run.id"] == run.pk
    assert root.attributes["loop.run.status"] == "completed"
    nodes = {s.attributes["loop.node.id"]: s for s in spans if s.name.startswith("node ")}
    assert set(nodes) == {"work", "wrap"}
    assert {s.parent_span_id for s in nodes.values()} == {root.span_id}
    for span in spans:  # every span within the run's
        assert root.start <= span.start <= span.end <= root.end, span.name

    calls = [s for s in spans if "gen_ai.request.model" in s.attributes]
    assert len(calls) == 3 and {s.name for s in calls} == {"chat fake-model"}
    for call in calls:
        row = Iteration.objects.get(
            run=run, node_id=call.attributes["loop.node.id"],
            number=call.attributes["loop.iteration.number"],
        )  # fmt: skip
        assert call.parent_span_id == nodes[row.node_id].span_id
        assert call.attributes["gen_ai.provider.name"] == "openai"
        assert call.attributes["gen_ai.operation.name"] == "chat"
        assert call.attributes["gen_ai.usage.input_tokens"] == row.tokens_in > 0
        assert call.attributes["gen_ai.usage.output_tokens"] == row.tokens_out > 0
        assert call.attributes["gen_ai.usage.cost"] == float(row.cost_usd) > 0

    gates = sorted((s for s in spans if s.name == "gate work"), key=lambda s: s.start)
    assert [g.attributes["loop.gate.decision"] for g in gates] == ["iterated", "accepted"]
    for gate in gates:
        assert gate.parent_span_id == nodes["work"].span_id
        assert gate.attributes["loop.gate.decided_by"] == "otto"
        assert gate.attributes["loop.gate.surface"] == "console"

    # The page and the API name the trace (where the variables are set, as on the worker).
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.url)
    client.force_login(operator)
    page = client.get(run.get_absolute_url()).content.decode()
    assert (
        f'<code class="trace-id" title="This run\'s OpenTelemetry trace id">{trace}</code>' in page
    )
    assert run_api_answer(run)["trace_id"] == trace


def run_api_answer(run) -> dict:
    from runs.api import run_out

    return run_out(RequestFactory().get("/"), run)


def test_without_an_endpoint_nothing_is_made_or_sent(
    db, make_recipe, operator, client, monkeypatch, django_capture_on_commit_callbacks
):
    from runs import dispatch

    for name in (*telemetry.ENDPOINTS, "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    made = []
    monkeypatch.setattr(telemetry, "_make", lambda: made.append("an exporter"))
    monkeypatch.setattr(telemetry, "_made", {})
    monkeypatch.setattr(dispatch, "deliver", lambda *args, **kwargs: None)  # no worker here
    recipe = make_recipe("name: quiet\nprovider: demo\nnodes:\n  - id: say\n    bash: echo hi\n")
    with django_capture_on_commit_callbacks(execute=True):
        run = services.start_run(recipe, Actor.operator(operator, "console"))
        services.cancel_run(run, Actor.operator(operator, "console"))
    run.refresh_from_db()
    assert run.status == "cancelled"  # it ended, and nothing was exported
    assert made == [] and telemetry._made == {}
    client.force_login(operator)
    assert "trace-id" not in client.get(run.get_absolute_url()).content.decode()
    assert run_api_answer(run)["trace_id"] is None


def test_the_variables_that_turn_traces_on_and_off(monkeypatch):
    for name in (*telemetry.ENDPOINTS, "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER"):
        monkeypatch.delenv(name, raising=False)
    assert not telemetry.enabled()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces")
    assert telemetry.enabled()
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    assert not telemetry.enabled()
    monkeypatch.delenv("OTEL_TRACES_EXPORTER")
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not telemetry.enabled()


def test_a_runs_trace_id_is_derived_from_its_row(db, make_recipe, monkeypatch):
    from runs.models import Run

    monkeypatch.setattr("runs.dispatch.deliver", lambda *args, **kwargs: None)
    recipe = make_recipe("name: ids\nprovider: demo\nnodes:\n  - id: say\n    bash: echo hi\n")
    one = services.start_run(recipe, Actor("engine"))
    other = services.start_run(recipe, Actor("engine"))
    again = Run.objects.get(pk=one.pk)  # another process reads the same row
    assert telemetry.trace_id(one) == telemetry.trace_id(again)
    assert telemetry.trace_id(one) != telemetry.trace_id(other)
    assert len(telemetry.trace_id(one)) == 32 and int(telemetry.trace_id(one), 16)
