"""OpenAI-compatible and Anthropic providers driven through a real worker, against a local
server that speaks both streaming APIs."""

from __future__ import annotations

from decimal import Decimal

from runs.models import Conversation
from tests.conftest import wait_run
from tests.providers.conftest import iterations, node, seen_streaming

SCHEMA = """    output_format:
      type: object
      properties:
        done: {type: boolean}
      required: [done]"""


def recipe(
    kind: str,
    url: str,
    *,
    fresh: bool = False,
    key: str = "FAKE_PROVIDER_KEY",
    options: str = "",
    extra: str = "",
    until: str = "until: Done",
    iterations: int = 2,
) -> str:
    return f"""
name: {kind}-loop
provider: agent
model: fake-model
providers:
  agent: {{kind: {kind}, base_url: "{url}", api_key_env: {key}{options}}}
nodes:
  - id: work
{extra}
    loop:
      prompt: "Say something."
      {until}
      max_iterations: {iterations}
      fresh_context: {"true" if fresh else "false"}
"""


def user_turns(request: dict) -> list[str]:
    return [m["content"] for m in request["body"]["messages"] if m["role"] == "user"]


# --- OpenAI-compatible ---------------------------------------------------------------------


def test_openai_streams_keeps_history_and_records_usage(live_worker, start, fake_ai):
    fake_ai.delay = 0.2
    fake_ai.answers = ["Not yet, still working on it.", "All finished.\n<promise>DONE</promise>"]
    source = recipe(
        "openai",
        fake_ai.url + "/v1",
        options=", price_in: 1000, price_out: 2000",
        until="until: DONE",
    )
    run = start(source)
    seen_streaming(run, "Not yet")
    wait_run(run)
    assert run.status == "completed", run.error
    first, second = fake_ai.requests
    assert first["path"] == "/v1/chat/completions" and first["body"]["stream"] is True
    assert first["headers"]["authorization"] == "Bearer sk-fake-provider-key"
    assert [m["role"] for m in second["body"]["messages"]] == ["user", "assistant", "user"]
    assert second["body"]["messages"][1]["content"] == "Not yet, still working on it."
    one, two = iterations(run)
    assert one.session_id == two.session_id
    assert (
        Conversation.objects.get(session_id=one.session_id)
        .messages[-1]["content"]
        .startswith("All finished")
    )
    assert one.tokens_in == 2 and one.tokens_out == 6
    assert one.cost_usd == Decimal("0.014000")  # 2 × 1000 + 6 × 2000 per million


def test_openai_fresh_context_sends_no_history(live_worker, start, fake_ai):
    run = wait_run(start(recipe("openai", fake_ai.url + "/v1", fresh=True, until="until: NEVER")))
    assert run.status == "failed"  # max_iterations without the signal
    assert [len(r["body"]["messages"]) for r in fake_ai.requests] == [1, 1]
    one, two = iterations(run)
    assert one.session_id != two.session_id


def test_openai_enforces_the_schema_with_response_format(live_worker, start, fake_ai):
    source = recipe("openai", fake_ai.url + "/v1", extra=SCHEMA, until="until_field: done")
    run = wait_run(start(source))
    assert run.status == "completed", run.error
    (request,) = fake_ai.requests
    fmt = request["body"]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["done"]
    assert "## Output format" not in user_turns(request)[0]
    assert node(run).structured == {"done": True}


def test_openai_best_effort_reasks_in_a_throwaway_session(live_worker, start, fake_ai):
    fake_ai.answers = ["I think it is done: {done: yes", '```json\n{"done": true}\n```']
    source = recipe(
        "openai",
        fake_ai.url + "/v1",
        options=", structured_output: best_effort",
        extra=SCHEMA,
        until="until_field: done",
    )
    run = wait_run(start(source))
    assert run.status == "completed", run.error
    first, reask = fake_ai.requests
    assert "response_format" not in first["body"]
    assert "## Output format" in user_turns(first)[0]
    assert len(reask["body"]["messages"]) == 1  # not threaded onto the invalid turn
    assert "did not produce valid structured output" in user_turns(reask)[0]
    (only,) = iterations(run)
    assert only.structured == {"done": True}


def test_openai_invalid_answers_exhaust_the_reasks_and_fail_the_node(live_worker, start, fake_ai):
    fake_ai.answers = ["nope"] * 4
    source = recipe(
        "openai",
        fake_ai.url + "/v1",
        options=", structured_output: best_effort",
        extra=SCHEMA,
        until="until_field: done",
    )
    run = wait_run(start(source))
    assert run.status == "failed"
    assert len(fake_ai.requests) == 4  # one answer and three re-asks
    assert "structured output does not match output_format" in node(run).error


def test_openai_401_fails_fast_naming_the_key_not_the_body(live_worker, start, fake_ai):
    run = wait_run(start(recipe("openai", fake_ai.url + "/v1", key="FAKE_PROVIDER_WRONG_KEY")))
    assert run.status == "failed"
    assert "HTTP 401 Unauthorized" in node(run).error and "api_key_env" in node(run).error
    assert "Invalid API key" not in node(run).error  # the body is logged, not shown
    assert len(fake_ai.requests) == 1  # permanent: no retry


def test_openai_429_is_retried_then_succeeds(live_worker, start, fake_ai):
    fake_ai.fail_next(429)
    run = wait_run(start(recipe("openai", fake_ai.url + "/v1")))
    assert run.status == "completed", run.error
    assert len(fake_ai.requests) == 2


def test_a_missing_key_variable_is_named_on_the_node(live_worker, start, fake_ai):
    run = wait_run(start(recipe("openai", fake_ai.url + "/v1", key="NO_SUCH_KEY_VARIABLE")))
    assert run.status == "failed"
    assert "NO_SUCH_KEY_VARIABLE" in node(run).error and "not set" in node(run).error
    assert fake_ai.requests == []


# --- Anthropic -----------------------------------------------------------------------------


def test_anthropic_streams_keeps_history_and_records_usage(live_worker, start, fake_ai):
    fake_ai.delay = 0.2
    fake_ai.answers = ["Still going, step one.", "All finished. DONE"]
    run = start(recipe("anthropic", fake_ai.url, until="until: DONE"))
    seen_streaming(run, "Still going")
    wait_run(run)
    assert run.status == "completed", run.error
    first, second = fake_ai.requests
    assert first["path"] == "/v1/messages"
    assert first["headers"]["x-api-key"] == "sk-fake-provider-key"
    assert first["headers"]["anthropic-version"] == "2023-06-01"
    assert [m["role"] for m in second["body"]["messages"]] == ["user", "assistant", "user"]
    one, two = iterations(run)
    assert one.session_id == two.session_id
    assert one.tokens_in == 2 and one.tokens_out == 4


def test_anthropic_reask_repairs_an_invalid_answer(live_worker, start, fake_ai):
    fake_ai.answers = ["Sure! done = yes", '{"done": true}']
    run = wait_run(start(recipe("anthropic", fake_ai.url, extra=SCHEMA, until="until_field: done")))
    assert run.status == "completed", run.error
    first, reask = fake_ai.requests
    assert "## Output format" in user_turns(first)[0]
    assert len(reask["body"]["messages"]) == 1
    assert node(run).structured == {"done": True}


def test_anthropic_server_errors_retry_and_bad_requests_fail(live_worker, start, fake_ai):
    fake_ai.fail_next(500)
    fake_ai.answers = ["All finished. Done"]
    run = wait_run(start(recipe("anthropic", fake_ai.url)))
    assert run.status == "completed", run.error
    assert len(fake_ai.requests) == 2

    fake_ai.reset()
    fake_ai.fail_next(400)
    run = wait_run(start(recipe("anthropic", fake_ai.url), slug="second"))
    assert run.status == "failed"
    assert "HTTP 400 Bad Request" in node(run).error
    assert "injected 400" not in node(run).error
    assert len(fake_ai.requests) == 1
