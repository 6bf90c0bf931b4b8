"""A Python loop's scores and stop rules (`LoopWorkflow(score=..., stop_rules=...)`), run by
a real worker on a provider whose scores rise then flatten and whose every call costs the
same: `target` ends the loop at the first score that reaches it, `plateau` asks a person
after k flat iterations, `cost_per_point` asks once a point of score costs too much."""

from __future__ import annotations

import pytest

from loops.python import Agent, CostPerPoint, LoopWorkflow, Plateau, StopRules, Target
from recipes.editing import create_recipe
from recipes.models import Recipe
from runs import services
from runs.actor import ENGINE, Actor
from runs.models import Iteration, Run
from tests.conftest import wait_run
from tests.python.test_gates import pending

SCORES = (0.3, 0.55, 0.7, 0.8, 0.82, 0.82, 0.82, 0.82)
COST = "0.05"  # dollars, every call

SCORED = '''"""Scored writer"""
import json
from decimal import Decimal

from pydantic import BaseModel

from loops.python import Agent, CostPerPoint, LoopWorkflow, Plateau, StopRules, Target
from runs.providers.base import AgentResult as ProviderResult

SCORES = SCORES_HERE


class Draft(BaseModel):
    text: str
    quality: float


class RisingThenFlat:
    """Each iteration's draft scores SCORES[iteration - 1] and costs the same."""

    name = "rising"
    structured_output = "best_effort"

    def run(self, request, on_chunk):
        answer = json.dumps({"text": "draft", "quality": SCORES[request.iteration - 1]})
        on_chunk(answer)
        return ProviderResult(
            text=answer, tokens_in=10, tokens_out=5, cost_usd=Decimal("COST_HERE")
        )


workflow = LoopWorkflow(
    [Agent("writer", "Write the draft.", provider=RisingThenFlat(), output_type=Draft)],
    max_iterations=8,
    score=SCORE_HERE,
    stop_rules=RULES_HERE,
)
'''


@pytest.fixture
def scored_recipe(tmp_path):
    def make(slug: str, rules: str, score: str = '"quality"') -> Recipe:
        source = (
            SCORED.replace("SCORES_HERE", repr(SCORES))
            .replace("COST_HERE", COST)
            .replace("SCORE_HERE", score)
            .replace("RULES_HERE", rules)
        )
        path = tmp_path / f"{slug.replace('-', '_')}.py"
        path.write_text(source)
        recipe, _ = create_recipe(
            source, slug=slug, origin=Recipe.Origin.PROJECT, source_path=str(path)
        )
        return recipe

    return make


def scores_of(run: Run) -> list[float | None]:
    calls = Iteration.objects.filter(run=run, node_id="writer").order_by("number")
    return list(calls.values_list("score", flat=True))


def fired_events(run: Run) -> list[dict]:
    return [e.data for e in run.events.filter(kind="stop_rule_fired").order_by("id")]


def test_target_ends_the_loop_at_the_first_score_that_reaches_it(live_worker, scored_recipe):
    recipe = scored_recipe("scored-target", "StopRules(target=Target(0.8))")
    run = services.start_run(recipe, actor=ENGINE, message="Write")
    wait_run(run, "completed", "failed", "paused")
    assert run.status == "completed", run.error

    assert scores_of(run) == [0.3, 0.55, 0.7, 0.8]
    writer = Iteration.objects.get(run=run, node_id="writer", number=4)
    assert writer.score_detail == {"source": "python"}
    row = writer.node_run
    assert row.state["score"] == "python"
    assert row.state["stop"] == {"target": {"at": 0.8, "then": "complete"}}
    (event,) = fired_events(run)
    assert (event["rule"], event["then"], event["iteration"]) == ("target", "complete", 4)
    assert event["reason"] == "score 0.8 reached the target 0.8"
    assert event["trend"] == [0.3, 0.55, 0.7, 0.8]
    ended = run.events.get(kind="run_completed").data
    assert (ended["ended"], ended["iterations"]) == ("stop_rule", 4)
    assert ended["stop_reason"].startswith("Stop rule target: score 0.8 reached the target")
    assert not run.gates.exists()


def test_plateau_opens_a_gate_naming_the_rule_and_accepting_ends(
    live_worker, scored_recipe, operator
):
    rules = "StopRules(plateau=Plateau(iterations=2, min_gain=0.05))"
    run = services.start_run(scored_recipe("scored-plateau", rules), actor=ENGINE, message="W")
    gate = pending(run)
    # 0.82, 0.82 gain 0.02 over the best before them (0.8): flat for 2 iterations.
    assert (gate.node_id, gate.iteration_number) == ("writer", 6)
    assert gate.kind == "loop" and gate.channels == ["stop:plateau"]
    assert gate.message.startswith("Stop rule plateau: no gain above 0.05 for 2 iterations")
    assert "0.3 → 0.55 → 0.7 → 0.8 → 0.82 → 0.82" in gate.message
    assert gate.empty_approve_completes
    stored = Iteration.objects.get(run=run, node_id="writer", number=1).node_run.state
    assert stored["stop"] == {"plateau": {"iterations": 2, "min_gain": 0.05, "then": "gate"}}

    services.approve(gate.pk, Actor.operator(operator, "console"))
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    ended = run.events.get(kind="run_completed").data
    assert (ended["ended"], ended["iterations"]) == ("accepted", 6)
    # The replay after the decision logged nothing twice and asked no agent again.
    (event,) = fired_events(run)
    assert (event["rule"], event["then"], event["iteration"]) == ("plateau", "gate", 6)
    assert all(it.attempts == 1 for it in Iteration.objects.filter(run=run))
    assert scores_of(run) == list(SCORES[:6])


def test_cost_per_point_asks_when_a_point_costs_too_much(live_worker, scored_recipe, operator):
    # No score for iteration 1 (said in the events); $0.10 for the last two iterations'
    # gain: 0.25 points by iteration 4 ($0.40 a point), 0.12 by 5, 0.02 by 6 ($5 a point).
    score = "lambda result, iteration: None if iteration == 1 else result.output.quality"
    rules = "StopRules(cost_per_point=CostPerPoint(max_usd=1.0, iterations=2))"
    recipe = scored_recipe("scored-cost", rules, score=score)
    run = services.start_run(recipe, actor=ENGINE, message="Write")
    first = pending(run)
    assert (first.iteration_number, first.channels) == (6, ["stop:cost_per_point"])
    assert first.message.startswith("Stop rule cost_per_point: the last 2 iterations cost $5")
    missing = run.events.get(kind="score_missing")
    assert (missing.step, missing.data["iteration"]) == ("writer", 1)
    assert "score() gave no score" in missing.data["reason"]
    assert Iteration.objects.get(run=run, node_id="writer", number=2).cost_usd is not None

    # Feedback iterates; still flat, the rule asks again; reject fails the run.
    services.approve(first.pk, Actor.operator(operator, "console"), comment="try harder")
    second = pending_after(run, first)
    assert second.iteration_number == 7 and second.channels == ["stop:cost_per_point"]
    assert "try harder" in Iteration.objects.get(run=run, node_id="writer", number=7).prompt
    services.reject(second.pk, Actor.operator(operator, "console"), reason="too dear")
    wait_run(run, "failed", "completed")
    assert run.status == "failed" and "rejected at the gate after iteration 7" in run.error
    assert scores_of(run) == [None, *SCORES[1:7]]
    first_call = Iteration.objects.get(run=run, node_id="writer", number=1)
    assert first_call.score_detail == {"source": "python", "error": "score() gave no score"}
    assert [e["iteration"] for e in fired_events(run)] == [6, 7]


def pending_after(run: Run, gate):
    from tests.conftest import wait_for

    return wait_for(
        lambda: run.gates.filter(status="pending").exclude(pk=gate.pk).first(),
        60,
        message="the next pending gate",
    )


# --- what LoopWorkflow refuses -----------------------------------------------------------

WRITER = Agent("writer", "Write.", provider="demo")


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"score": 0.9}, "score must be the name of a numeric field"),
        ({"score": ""}, "score must be the name of a numeric field"),
        ({"score": "q", "stop_rules": {"target": {"at": 0.9}}}, "stop_rules must be StopRules"),
        ({"score": "q", "stop_rules": Target(0.9)}, "stop_rules must be StopRules"),
        ({"score": "q", "stop_rules": StopRules(target=0.9)}, "must be a Target(...)"),
        (
            {"score": "q", "stop_rules": StopRules(plateau=Target(0.9))},
            "StopRules(plateau=...) must be a Plateau(...)",
        ),
    ],
)
def test_a_wrong_score_or_stop_rules_is_a_type_error(kwargs, words):
    with pytest.raises(TypeError, match=words.replace("(", r"\(").replace(")", r"\)")):
        LoopWorkflow([WRITER], **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"stop_rules": StopRules(target=Target(0.9))}, "stop_rules read scores"),
        ({"score": "q", "stop_rules": StopRules(target=Target(0.9, "stop"))}, "then=..."),
        ({"score": "q", "stop_rules": StopRules(plateau=Plateau(0))}, "1-1000"),
        ({"score": "q", "stop_rules": StopRules(cost_per_point=CostPerPoint(-1))}, "0 or more"),
    ],
)
def test_a_wrong_rule_value_is_a_value_error(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(".", r"\.")):
        LoopWorkflow([WRITER], **kwargs)


def test_the_rules_are_kept_and_an_empty_set_is_none():
    rules = StopRules(target=Target(0.9), plateau=Plateau(3, 0.01))
    loop = LoopWorkflow([WRITER], score=lambda result, iteration: 1.0, stop_rules=rules)
    assert loop.stop_rules is rules
    assert LoopWorkflow([WRITER], score="q", stop_rules=StopRules()).stop_rules is None


def test_without_the_console_a_score_that_raises_is_no_score_and_the_rules_go_on():
    """`DirectHost` (a plain script): nothing recorded, the rules still decide."""
    import asyncio
    import json
    from decimal import Decimal

    from loops.python import DirectHost, GateDecision
    from runs.providers.base import AgentResult as ProviderResult

    class Rising:
        structured_output = "best_effort"

        def run(self, request, on_chunk):
            answer = json.dumps({"quality": SCORES[request.iteration - 1]})
            return ProviderResult(text=answer, cost_usd=Decimal(COST))

    def score(result, iteration):
        if iteration == 2:
            raise RuntimeError("the eval crashed")
        return json.loads(result.text)["quality"]

    asked = []
    loop = LoopWorkflow(
        [Agent("writer", "Write.", provider=Rising())],
        max_iterations=8,
        score=score,
        stop_rules=StopRules(plateau=Plateau(2, 0.05)),
    )
    host = DirectHost(decide=lambda request: asked.append(request) or GateDecision("accept"))
    result = asyncio.run(loop.run("Write", host=host))
    (request,) = asked
    assert (request.iteration, request.firing.rule) == (6, "plateau")
    assert request.firing.trend == (0.3, 0.7, 0.8, 0.82, 0.82)  # iteration 2 has no score
    assert (result.status, result.iterations) == ("accepted", 6)
