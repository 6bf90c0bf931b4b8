"""Scores per iteration and the stop rules that read them, through a real worker and a
scripted OpenAI-compatible provider on 127.0.0.1 whose scores rise, then flatten."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest

from recipes.validation import validate_source
from runs import services
from runs.actor import Actor
from runs.executor.context import run_dirs
from tests.conftest import pending_gate, wait_for, wait_run

# $1 a token out, nothing in: an iteration's cost is the number of words it answers.
PRICED = ", price_in: 0, price_out: 1000000"
SCHEMA = """
    output_format:
      type: object
      properties:
        quality: {type: number}
      required: [quality]"""


def recipe(url: str, loop: str, *, schema: bool = True, head: str = "") -> str:
    return f"""
name: scored
provider: agent
model: worker-model
providers:
  agent: {{kind: openai, base_url: "{url}/v1", api_key_env: FAKE_PROVIDER_KEY{PRICED}}}
{head}
nodes:
  - id: improve
{SCHEMA if schema else ""}
    loop:
      prompt: "Improve the essay."
      fresh_context: true
{loop}
"""


def scores_answer(*scores):
    """Answers the worker's calls with `{"quality": s}`, one score per call, in order."""
    return [json.dumps({"quality": s}) for s in scores]


def completed_by(run) -> list[str]:
    return run.events.get(kind="node_completed", step="improve").data["channels"]


def iterations(run):
    return list(run.iterations.filter(node_id="improve").order_by("number"))


def test_target_ends_the_loop_at_the_first_score_at_or_above_it(live_worker, start, fake_ai):
    fake_ai.answers = scores_answer(0.2, 0.5, 0.8, 0.93, 0.99)
    loop = """      max_iterations: 8
      score: {field: quality}
      stop: {target: 0.9}"""
    run = wait_run(start(recipe(fake_ai.url, loop)), "completed", "failed")
    assert run.status == "completed", run.error
    its = iterations(run)
    assert [it.score for it in its] == [0.2, 0.5, 0.8, 0.93]
    assert its[-1].channels == [] and its[-1].score_detail == {"source": "field"}
    row = run.nodes.get(node_id="improve", iteration=0)
    assert completed_by(run) == ["stop:target"]
    assert row.state["stop"] == {"target": {"at": 0.9, "then": "complete"}}
    fired = run.events.get(kind="stop_rule_fired")
    assert fired.data["rule"] == "target" and fired.data["iteration"] == 4
    assert fired.data["trend"] == [0.2, 0.5, 0.8, 0.93]


def test_plateau_opens_a_gate_naming_the_rule_and_accepting_completes(
    live_worker, start, fake_ai, operator
):
    fake_ai.answers = scores_answer(0.2, 0.5, 0.6, 0.61, 0.62, 0.9)
    loop = """      max_iterations: 8
      score: {field: quality}
      stop:
        plateau: {iterations: 2, min_gain: 0.05}"""
    run = wait_run(start(recipe(fake_ai.url, loop)), "paused", "completed", "failed")
    gate = pending_gate(run)
    assert gate is not None, run.error
    # 0.6 was the best before; 0.61 and 0.62 gained 0.02: flat for two iterations.
    assert gate.iteration.number == 5
    assert gate.message.startswith("Stop rule plateau: no gain above 0.05 for 2 iterations")
    assert "0.2 → 0.5 → 0.6 → 0.61 → 0.62" in gate.message
    assert gate.channels == ["stop:plateau"] and gate.plain_approve_accepts
    services.approve(gate.pk, Actor.operator(operator, "api"))
    run = wait_run(run, "completed", "failed")
    assert run.status == "completed"
    assert run.nodes.get(node_id="improve", iteration=0).output == json.dumps({"quality": 0.62})


def test_feedback_at_a_plateau_gate_iterates_and_the_rule_reads_on(
    live_worker, start, fake_ai, operator
):
    fake_ai.answers = scores_answer(0.5, 0.5, 0.9, 0.9)
    loop = """      max_iterations: 6
      score: {field: quality}
      stop: {plateau: 1}"""
    run = wait_run(start(recipe(fake_ai.url, loop)), "paused", "completed", "failed")
    gate = pending_gate(run)
    assert gate.iteration.number == 2
    services.approve(gate.pk, Actor.operator(operator, "api"), comment="Try a new angle.")
    wait_for(lambda: run.gates.filter(status="pending").exclude(pk=gate.pk).exists(), 60)
    again = pending_gate(run)
    assert again.iteration.number == 4  # 0.9 gained at 3, flat at 4
    assert "best before: 0.9, since: 0.9" in again.message


def test_cost_per_point_fires_when_the_gain_per_dollar_falls(live_worker, start, fake_ai):
    # Each answer is two words: $2 an iteration. Gains 0.4, 0.2, 0.2, then 0.01 a step:
    # $5, $10, $10, then $200 a point, above the $50 limit.
    fake_ai.answers = scores_answer(0.1, 0.5, 0.7, 0.9, 0.91, 0.92)
    loop = """      max_iterations: 8
      score: {field: quality}
      stop:
        cost_per_point: {max_usd: 50, iterations: 1, then: complete}"""
    run = wait_run(start(recipe(fake_ai.url, loop)), "completed", "failed")
    assert run.status == "completed", run.error
    its = iterations(run)
    assert [it.cost_usd for it in its] == [Decimal(2)] * 5
    assert len(its) == 5
    fired = run.events.get(kind="stop_rule_fired").data
    assert fired["rule"] == "cost_per_point" and fired["iteration"] == 5
    assert "$200 a point" in fired["reason"]


def judge_or_worker(body):
    """The worker writes drafts; the judge (its own model) scores each by its length."""
    if body["model"] == "judge-model":
        draft = body["messages"][-1]["content"].split("--- the answer ---")[1]
        words = len(draft.split("--- end")[0].split())
        return json.dumps({"score": words, "reason": f"{words} words <b>long</b>"})
    drafts = sum(1 for m in body["messages"] if m["role"] == "user")
    return "draft " * (len(body["messages"]) + drafts)


def test_a_judge_scores_each_iteration_with_its_own_provider(live_worker, start, fake_ai):
    fake_ai.answers = [judge_or_worker] * 20
    head = f"""  judge: {{kind: openai, base_url: "{fake_ai.url}/v1", api_key_env: FAKE_PROVIDER_KEY{PRICED}}}"""
    source = recipe(
        fake_ai.url,
        """      max_iterations: 3
      until: NEVER
      score:
        judge: {provider: judge, model: judge-model, rubric: "Longer is better. Score 0-100."}""",
        schema=False,
    ).replace("providers:\n", "providers:\n" + head + "\n")
    run = wait_run(start(source), "completed", "failed")
    assert run.status == "failed" and "max_iterations" in run.error  # NEVER never came
    its = iterations(run)
    assert [it.score for it in its] == [2.0, 2.0, 2.0]
    detail = its[0].score_detail
    assert detail["source"] == "judge" and detail["reason"] == "2 words <b>long</b>"
    assert detail["judge"]["provider"] == "judge"
    judge_calls = [r for r in fake_ai.requests if r["body"]["model"] == "judge-model"]
    assert len(judge_calls) == 3
    assert "Longer is better" in judge_calls[0]["body"]["messages"][-1]["content"]
    # The iteration's cost is the worker's three words and what the judge cost.
    assert its[0].cost_usd == Decimal(3) + Decimal(detail["judge"]["cost_usd"])


def test_a_command_scores_the_answer_it_reads_on_its_standard_input(live_worker, start, fake_ai):
    fake_ai.answers = ["one", "one two", "one two three; rm -rf ~ $(touch pwned)"]
    loop = """      max_iterations: 3
      score: {bash: "wc -w"}
      stop: {target: 5}"""
    run = wait_run(start(recipe(fake_ai.url, loop, schema=False)), "completed", "failed")
    its = iterations(run)
    assert [it.score for it in its] == [1.0, 2.0, 8.0]
    assert completed_by(run) == ["stop:target"]
    # The answer reached the command as a value: its `$(touch pwned)` never ran.
    assert not (run_dirs(run)[0] / "pwned").exists()


@pytest.mark.parametrize(
    ("loop", "path", "words"),
    [
        ("score: {field: nope}\n      until: X", "nodes[0].loop.score.field", "output_format"),
        ("score: {field: quality, bash: x}\n      until: X", "nodes[0].loop.score", "exactly one"),
        ("stop: {target: 1}", "nodes[0].loop.stop", "declare how the loop is scored"),
        (
            "score: {field: quality}\n      stop: {plateau: {iterations: 0}}",
            "nodes[0].loop.stop.plateau.iterations",
            "1-1000",
        ),
        (
            "score: {field: quality}\n      stop: {target: {at: 1, then: ship}}",
            "nodes[0].loop.stop.target.then",
            "complete or gate",
        ),
        ("score: {field: quality}\n      stop: {soon: 1}", "nodes[0].loop.stop.soon", "unknown"),
        (
            "score: {judge: {provider: j}}\n      until: X",
            "nodes[0].loop.score.judge.rubric",
            "rubric",
        ),
    ],
)
def test_score_and_stop_mistakes_are_refused_on_their_line(db, loop, path, words):
    source = recipe("http://127.0.0.1:1", f"      max_iterations: 3\n      {loop}")
    result = validate_source(source, "scored.yaml")
    assert not result.ok
    problem = next(p for p in result.errors if p.path == path)
    assert words in problem.message and problem.line


def test_a_loop_with_only_stop_rules_has_a_completion_condition(db):
    ok = validate_source(
        recipe(
            "http://127.0.0.1:1",
            "      max_iterations: 3\n      score: {field: quality}\n"
            "      stop: {target: 0.9, plateau: {iterations: 3}}",
        ),
        "scored.yaml",
    )
    assert ok.ok, ok.errors
    loop = ok.spec.nodes[0].loop
    assert loop.stop == {
        "target": {"at": 0.9, "then": "complete"},
        "plateau": {"iterations": 3, "then": "gate"},
    }


def test_an_iteration_that_cannot_be_scored_says_why_and_the_loop_goes_on(
    live_worker, start, fake_ai, client, operator
):
    fake_ai.answers = ["first", "second DONE"]
    loop = """      max_iterations: 3
      until: DONE
      score: {bash: 'echo "no number here"; exit 3'}
      stop: {target: 5}"""
    run = wait_run(start(recipe(fake_ai.url, loop, schema=False)), "completed", "failed")
    assert run.status == "completed", run.error
    first, second = iterations(run)
    assert first.score is None
    assert first.score_detail == {"source": "bash", "error": "the score command exited 3"}
    missing = run.events.filter(kind="score_missing").values_list("data__reason", flat=True)
    assert list(missing) == ["the score command exited 3"] * 2
    client.force_login(operator)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert "No score" in page and "the score command exited 3" in page
