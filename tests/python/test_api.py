"""The Python loop API on its own: context rule, stop conditions, iteration limit,
structured outputs, sequential and parallel composition, gates (no console involved)."""

from __future__ import annotations

import json
import threading
from decimal import Decimal

import pytest
from pydantic import BaseModel

from loops.python import (
    Agent,
    AgentFailed,
    AgentResult,
    DirectHost,
    GateDecision,
    GateRejected,
    LoopWorkflow,
    ParallelWorkflow,
    SequentialWorkflow,
    Status,
    contains_keyword,
    min_iterations_and_length,
    score_at_least,
)
from runs.providers.base import AgentResult as ProviderResult
from runs.providers.demo import DemoProvider

from .scripted import ScriptedProvider, run_async


class Review(BaseModel):
    content: str
    score: int
    feedback: str


def run(workflow, text="Write marketing copy", **host):
    return run_async(workflow.run(text, host=DirectHost(**host)))


def echo(request, count):
    return f"answer {count} from {request.node_id} in iteration {request.iteration}"


# --- the context rule --------------------------------------------------------------------


def test_only_the_first_agent_of_the_first_iteration_sees_the_user_input():
    provider = ScriptedProvider(echo)
    writer = Agent("writer", "Write.", provider=provider)
    reviewer = Agent("reviewer", "Review.", provider=provider)
    result = run(LoopWorkflow([writer, reviewer], max_iterations=3), "UNIQUE-USER-INPUT")

    assert result.iterations == 3
    calls = [(r.node_id, r.iteration) for r in provider.requests]
    assert calls == [(n, i) for i in (1, 2, 3) for n in ("writer", "reviewer")]
    with_input = [r for r in provider.requests if "UNIQUE-USER-INPUT" in r.prompt]
    assert [(r.node_id, r.iteration) for r in with_input] == [("writer", 1)]


def test_each_agent_sees_the_previous_result_and_from_iteration_two_the_previous_iteration():
    provider = ScriptedProvider(echo)
    loop = LoopWorkflow(
        [
            Agent("writer", "Write.", provider=provider),
            Agent("reviewer", "Rev.", provider=provider),
        ],
        max_iterations=2,
    )
    run(loop)
    writer, reviewer = provider.prompts_for("writer"), provider.prompts_for("reviewer")
    # Iteration 1: the reviewer sees the writer's draft, and nothing from an iteration 0.
    assert "answer 1 from writer in iteration 1" in reviewer[0]
    assert "previous iteration" not in reviewer[0]
    # Iteration 2: the writer builds on the review; the reviewer sees the new draft and
    # its own judgement of the previous iteration.
    assert "answer 2 from reviewer in iteration 1" in writer[1]
    assert "answer 3 from writer in iteration 2" in reviewer[1]
    assert "answer 2 from reviewer in iteration 1" in reviewer[1]
    assert "answer 1 from writer" not in reviewer[1]


# --- stop conditions ---------------------------------------------------------------------


def result_with(output, text=None, agent="reviewer"):
    text = text if text is not None else (output if isinstance(output, str) else "x")
    return AgentResult(agent=agent, text=text, output=output)


@pytest.mark.parametrize(
    ("output", "stops"),
    [
        (Review(content="c", score=80, feedback="f"), True),
        (Review(content="c", score=79, feedback="f"), False),
        ({"score": 95}, True),
        ({"score": True}, False),  # a boolean is not a score
        ('{"score": 81}', True),  # JSON text
        ("no score here", False),
        ({"other": 100}, False),
    ],
)
def test_score_at_least(output, stops):
    assert score_at_least("score", 80)(result_with(output), 1) is stops


def test_contains_keyword_ignores_case_and_needs_a_word():
    condition = contains_keyword("APPROVED")
    assert condition(result_with("Looks good: approved."), 1)
    assert not condition(result_with("Needs work."), 1)
    with pytest.raises(ValueError):
        contains_keyword("")


def test_min_iterations_and_length_needs_both():
    condition = min_iterations_and_length(2, 10)
    long_text = result_with("x" * 10)
    assert not condition(long_text, 1)
    assert not condition(result_with("short"), 5)
    assert condition(long_text, 2)


def test_conditions_compose_with_and_or_and_plain_functions():
    high = score_at_least("score", 80)
    keyword = contains_keyword("ship it")
    good_and_said = high & keyword
    either = high | keyword
    assert good_and_said(result_with({"score": 90}, "ship it"), 1)
    assert not good_and_said(result_with({"score": 90}, "not yet"), 1)
    assert either(result_with({"score": 10}, "ship it"), 1)
    assert not either(result_with({"score": 10}, "nope"), 1)

    def third(result, iteration):
        return iteration >= 3

    late_or_high = third | high  # a plain function on the left composes too
    assert late_or_high(result_with({"score": 0}), 3)
    assert not late_or_high(result_with({"score": 0}), 2)
    assert "score >= 80" in str(high & keyword)


def test_stop_condition_is_called_after_each_iteration_with_the_last_result():
    seen = []

    def stop(result, iteration):
        seen.append((result.agent, iteration))
        return iteration == 2

    provider = ScriptedProvider(echo)
    loop = LoopWorkflow(
        [Agent("a", "A.", provider=provider), Agent("b", "B.", provider=provider)],
        stop_condition=stop,
        max_iterations=5,
    )
    result = run(loop)
    assert seen == [("b", 1), ("b", 2)]
    assert result.status == Status.CONDITION_MET
    assert result.iterations == 2
    assert len(provider.requests) == 4


def test_max_iterations_ends_the_loop_with_a_status_that_says_so():
    provider = ScriptedProvider(echo)
    loop = LoopWorkflow(
        [Agent("a", "A.", provider=provider)],
        stop_condition=contains_keyword("never said"),
        max_iterations=4,
    )
    result = run(loop)
    assert result.status == Status.MAX_ITERATIONS == "max_iterations_reached"
    assert result.iterations == 4
    assert len(provider.requests) == 4
    assert result.text == "answer 4 from a in iteration 4"


def test_invalid_definitions_are_refused_with_a_reason():
    agent = Agent("a", "A.", provider=ScriptedProvider(echo))
    with pytest.raises(ValueError, match="max_iterations"):
        LoopWorkflow([agent], max_iterations=0)
    with pytest.raises(ValueError, match="at least one"):
        LoopWorkflow([], max_iterations=2)
    with pytest.raises(ValueError, match="name"):
        Agent("no spaces allowed", "x")
    with pytest.raises(TypeError, match="pydantic"):
        Agent("a", "A.", output_type=dict)


def test_a_backend_object_without_the_protocol_is_refused_when_the_agent_is_built():
    """`Agent(model=obj)` (the design's spelling) or `provider=obj`: the console calls
    `run(request, on_chunk)` and reads `structured_output`, so both must be there."""

    class OnlyRun:
        def run(self, request, on_chunk):
            return "text"

    with pytest.raises(TypeError) as refused:
        Agent(model=OnlyRun(), name="reviewer", instructions="Review.", output_type=Review)
    message = str(refused.value)
    assert "agent 'reviewer'" in message and "OnlyRun" in message
    assert "structured_output" in message and "'enforced' or 'best_effort'" in message

    class NoRun:
        structured_output = "best_effort"

    with pytest.raises(TypeError, match=r"run\(request, on_chunk\)"):
        Agent("writer", "Write.", provider=NoRun())

    class AsyncRun:
        structured_output = "best_effort"

        async def run(self, request, on_chunk): ...

    with pytest.raises(TypeError, match="plain function"):
        Agent("writer", "Write.", model=AsyncRun())

    vague = ScriptedProvider(echo, structured_output="sometimes")
    with pytest.raises(TypeError, match="it is 'sometimes'"):
        Agent("writer", "Write.", provider=vague)


def test_a_backend_object_with_the_protocol_answers_the_agent():
    class Llm:
        structured_output = "best_effort"

        def run(self, request, on_chunk):
            on_chunk("hello")
            return ProviderResult(text=json.dumps({"content": "c", "score": 90, "feedback": "f"}))

    reviewer = Agent(model=Llm(), name="reviewer", instructions="Review.", output_type=Review)
    assert reviewer.provider_name == "Llm"
    assert run(reviewer).output.score == 90


# --- structured outputs ------------------------------------------------------------------


def test_the_seed_writer_reviewer_on_the_demo_agent_ends_on_iteration_three():
    demo = DemoProvider(delay=0)
    writer = Agent("writer", "Write content or improve it based on feedback.", provider=demo)
    reviewer = Agent(
        "reviewer", "Evaluate the writing; score 0-100.", provider=demo, output_type=Review
    )

    def quality_reached(result, iteration):
        return isinstance(result.output, Review) and result.output.score >= 80

    result = run(LoopWorkflow([writer, reviewer], quality_reached, max_iterations=5))
    assert result.status == Status.CONDITION_MET
    assert result.iterations == 3
    assert isinstance(result.output, Review) and result.output.score >= 80
    scores = [r.output.score for r in result.results if r.agent == "reviewer"]
    assert scores == sorted(scores) and scores[-1] >= 80 > scores[-2]


def test_a_best_effort_provider_is_re_asked_until_the_answer_fits_the_model():
    def answer(request, count):
        if count == 1:
            return "Here is my review: pretty good!"  # no JSON at all
        return json.dumps({"content": "c", "score": 91, "feedback": "ship"})

    provider = ScriptedProvider(answer)
    reviewer = Agent("reviewer", "Review.", provider=provider, output_type=Review)
    result = run(reviewer)
    assert isinstance(result.output, Review) and result.output.score == 91
    assert result.structured == {"content": "c", "score": 91, "feedback": "ship"}
    assert '"score"' in provider.requests[0].prompt  # the schema went with the prompt
    assert len(provider.requests) == 2
    assert result.usage.tokens_in == 20  # the re-ask's tokens count too


def test_an_answer_that_never_fits_fails_the_agent_with_the_reason():
    provider = ScriptedProvider(lambda request, count: json.dumps({"score": "high"}))
    reviewer = Agent("reviewer", "Review.", provider=provider, output_type=Review)
    with pytest.raises(AgentFailed, match="reviewer"):
        run(reviewer)


# --- composition -------------------------------------------------------------------------


def test_sequential_stages_see_the_previous_stage_and_not_the_input():
    provider = ScriptedProvider(echo)
    pipeline = SequentialWorkflow(
        [Agent("research", "R.", provider=provider), Agent("editor", "E.", provider=provider)]
    )
    result = run(pipeline, "TOPIC-X")
    research, editor = provider.prompts_for("research"), provider.prompts_for("editor")
    assert "TOPIC-X" in research[0] and "TOPIC-X" not in editor[0]
    assert "answer 1 from research" in editor[0]
    assert result.text == "answer 2 from editor in iteration 1"
    assert result.usage.tokens_out == 10


def test_parallel_stages_run_concurrently_and_gather_their_answers():
    both_running = threading.Barrier(2, timeout=60)

    def answer(request, count):
        both_running.wait()  # only returns once the other stage is running too
        return f"{request.node_id} done"

    provider = ScriptedProvider(answer)
    analysis = ParallelWorkflow(
        [Agent("market", "M.", provider=provider), Agent("tech", "T.", provider=provider)],
        name="analysis",
    )
    result = run(analysis)
    assert result.output == {"market": "market done", "tech": "tech done"}
    assert "## market" in result.text and "## tech" in result.text


def test_a_loop_is_one_stage_of_a_pipeline():
    demo = DemoProvider(delay=0)
    scripted = ScriptedProvider(echo)
    pipeline = SequentialWorkflow(
        [
            Agent("research", "Research the topic.", provider=scripted),
            ParallelWorkflow(
                [
                    Agent("market", "M.", provider=scripted),
                    Agent("audience", "A.", provider=scripted),
                ],
                name="analysis",
            ),
            LoopWorkflow(
                [
                    Agent("writer", "Write.", provider=demo),
                    Agent("reviewer", "Review.", provider=demo, output_type=Review),
                ],
                stop_condition=score_at_least("score", 80),
                max_iterations=5,
                name="draft",
            ),
            Agent("editor", "Polish.", provider=scripted),
        ]
    )
    result = run(pipeline, "TOPIC-Y")
    nodes = [r.node_id for r in scripted.requests]
    assert nodes[0] == "research" and nodes[-1] == "editor"
    assert sorted(nodes[1:3]) == ["analysis.audience", "analysis.market"]
    editor_prompt = scripted.prompts_for("editor")[0]
    assert '"score": 85' in editor_prompt  # the loop's final review reached the editor
    assert [r.agent for r in result.results].count("reviewer") == 3


# --- gates -------------------------------------------------------------------------------


def test_feedback_at_the_gate_reaches_the_next_iteration():
    provider = ScriptedProvider(echo)
    asked = []

    def decide(request):
        asked.append(request.iteration)
        if request.iteration == 1:
            return GateDecision(GateDecision.ITERATE, feedback="MORE-PUNCH")
        return GateDecision(GateDecision.ACCEPT)

    loop = LoopWorkflow(
        [Agent("writer", "W.", provider=provider), Agent("reviewer", "R.", provider=provider)],
        max_iterations=5,
        gate=True,
    )
    result = run(loop, decide=decide)
    assert asked == [1, 2]
    assert result.status == Status.ACCEPTED and result.iterations == 2
    with_feedback = [
        (r.node_id, r.iteration) for r in provider.requests if "MORE-PUNCH" in r.prompt
    ]
    assert with_feedback == [("writer", 2), ("reviewer", 2)]


def test_a_rejection_at_the_gate_stops_the_workflow():
    loop = LoopWorkflow([Agent("a", "A.", provider=ScriptedProvider(echo))], gate=True)
    with pytest.raises(GateRejected, match="not on brand"):
        run(loop, decide=lambda r: GateDecision(GateDecision.REJECT, feedback="not on brand"))


def test_a_gate_callable_decides_when_to_ask():
    asked = []

    def decide(request):
        asked.append(request.iteration)
        return GateDecision(GateDecision.ITERATE)

    loop = LoopWorkflow(
        [Agent("a", "A.", provider=ScriptedProvider(echo))],
        max_iterations=4,
        gate=lambda result, iteration: iteration % 2 == 0,
    )
    result = run(loop, decide=decide)
    assert asked == [2]  # never after the last iteration either
    assert result.status == Status.MAX_ITERATIONS


def test_usage_and_cost_add_up_over_the_calls():
    class Priced(ScriptedProvider):
        def run(self, request, on_chunk):
            result = super().run(request, on_chunk)
            result.cost_usd = Decimal("0.25")
            return result

    loop = LoopWorkflow([Agent("a", "A.", provider=Priced(echo))], max_iterations=3)
    result = run(loop)
    assert result.cost == Decimal("0.75")
    assert (result.usage.tokens_in, result.usage.tokens_out) == (30, 15)
