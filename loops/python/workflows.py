"""`LoopWorkflow`, `SequentialWorkflow`, `ParallelWorkflow`: stages that run like an agent."""

from __future__ import annotations

import asyncio
import inspect

from runs.engine.deadlines import GateDeadline
from runs.engine.stop_rules import COMPLETE, Point, fired

from .agents import Agent, Runnable, check_name
from .conditions import as_condition
from .context import Context, Scope, unique_names
from .results import (
    AgentResult,
    GateDecision,
    GateRejected,
    GateRequest,
    Status,
    WorkflowResult,
    combine_usage,
)
from .scoring import SOURCE, check_score, check_stop_rules, iteration_cost, score_of


def _stages(stages, what: str) -> list[Runnable]:
    stages = list(stages or [])
    if not stages:
        raise ValueError(f"{what} needs at least one agent or workflow")
    for stage in stages:
        if not isinstance(stage, Runnable):
            raise TypeError(f"{what}: {stage!r} is not an Agent or a workflow")
    return stages


def _summary(name: str, final: AgentResult, results: list[AgentResult], **extra) -> WorkflowResult:
    usage, cost = combine_usage(results)
    return WorkflowResult(
        agent=name,
        text=final.text,
        output=final.output,
        structured=final.structured,
        usage=usage,
        cost=cost,
        iteration=final.iteration,
        prompt=final.prompt,
        duration_ms=sum(r.duration_ms for r in results),
        results=results,
        **extra,
    )


def _flatten(result: AgentResult) -> list[AgentResult]:
    """The agent calls behind a result (a workflow's results are already flat)."""
    return list(result.results) if isinstance(result, WorkflowResult) else [result]


class _Composite(Runnable):
    stages: list[Runnable]

    def agents(self) -> list[Agent]:
        return [agent for stage in self.stages for agent in stage.agents()]

    def named_stages(self) -> list[tuple[str, Runnable]]:
        return list(zip(unique_names([s.name for s in self.stages]), self.stages, strict=True))


class GateOptions:
    """`LoopWorkflow(gate=GateOptions(...))`: when to ask (`when(result, iteration)`, else
    after every iteration) and a deadline, as a recipe's `gate_timeout` / `on_timeout`:
    `timeout` is a duration ("30m", "2h", "1d", or a timedelta), `on_timeout` one of
    "remind" (the default), "reject" or "fail" — never "approve". `escalate_to` (group or
    user names) are told at that deadline, which then moves on by `escalate_after` (a
    duration), as a recipe's escalate_to / escalate_after."""

    def __init__(
        self, *, when=None, timeout=None, on_timeout=None, escalate_to=None, escalate_after=None
    ):
        if when is not None and not callable(when):
            raise TypeError("GateOptions(when=...) must be a callable when(result, iteration)")
        if on_timeout is not None and timeout is None:
            raise ValueError("GateOptions(on_timeout=...) needs a timeout (how long it waits)")
        self.when = when
        self.deadline = GateDeadline.parse(
            timeout, on_timeout, escalate_to=escalate_to, escalate_after=escalate_after
        )

    def wanted(self, result, iteration: int) -> bool:
        return True if self.when is None else bool(self.when(result, iteration))


class LoopWorkflow(_Composite):
    """Run `agents` in order, iteration after iteration, until `stop_condition(result,
    iteration)` says stop (judged on each iteration's last result) or `max_iterations` ran.

    `gate=True` asks a person between iterations (a callable `gate(result, iteration)`
    decides when to ask; `GateOptions` adds a deadline): accept ends the loop, feedback
    reaches the next iteration.

    `score` scores each iteration's last result (a numeric field's name, or a callable
    `score(result, iteration) -> float | None`); `stop_rules` (`StopRules`) read the
    scores so far and end the loop or ask a person, as a YAML loop's `stop:` does.
    """

    def __init__(
        self,
        agents,
        stop_condition=None,
        max_iterations: int = 5,
        *,
        gate=False,
        score=None,
        stop_rules=None,
        name: str = "loop",
    ):
        self.name = check_name(name, "workflow")
        self.stages = _stages(agents, "LoopWorkflow")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise TypeError("max_iterations must be an integer")
        if not 1 <= max_iterations <= 1000:
            raise ValueError("max_iterations must be between 1 and 1000")
        self.max_iterations = max_iterations
        self.stop_condition = as_condition(stop_condition) if stop_condition else None
        if not (isinstance(gate, bool | GateOptions) or callable(gate)):
            raise TypeError(
                "gate must be True/False, a callable gate(result, iteration) or GateOptions(...)"
            )
        self.gate = gate
        self.score = check_score(score)
        self.stop_rules = check_stop_rules(stop_rules, self.score)

    def _wants_gate(self, result: AgentResult, iteration: int) -> bool:
        if isinstance(self.gate, GateOptions):
            return self.gate.wanted(result, iteration)
        if callable(self.gate):
            return bool(self.gate(result, iteration))
        return bool(self.gate)

    async def _execute(self, context: Context, scope: Scope) -> WorkflowResult:
        if scope.iteration > 1 and scope.path:
            # A loop inside another loop's later iteration records under its own name.
            scope = Scope(scope.host, (*scope.path[:-1], f"{scope.path[-1]}-{scope.iteration}"))
        stages = self.named_stages()
        history: list[AgentResult] = []
        points: list[Point] = []
        last_iteration: AgentResult | None = None
        feedback = context.feedback
        for iteration in range(1, self.max_iterations + 1):
            before = len(history)
            current = await self._one_pass(
                stages, context, scope, iteration, last_iteration, feedback, history
            )
            last_iteration = current
            last_stage = (*scope.path, stages[-1][0])
            await self._scored(scope, last_stage, iteration, current, history[before:], points)
            forked = await scope.host.forked_feedback(scope.path, iteration)
            if forked is not None:  # a fork goes on from here, with its own feedback
                feedback = forked
                continue
            ended = await self._settle(scope, last_stage, iteration, current, history, points)
            if isinstance(ended, WorkflowResult):
                return ended
            if ended is None:
                break
            feedback = ended
        return _summary(
            self.name,
            last_iteration,
            history,
            status=Status.MAX_ITERATIONS,
            iterations=self.max_iterations,
        )

    async def _settle(self, scope, last_stage, iteration, current, history, points):
        """What follows an iteration: the loop's result when it ends here, None when it
        ran out of iterations, else the feedback for the next one ("" for none)."""
        met = self.stop_condition(current, iteration) if self.stop_condition else False
        await scope.host.note(
            scope.path, "python_iteration_checked", iteration=iteration, condition_met=met
        )
        if met:
            return _summary(
                self.name, current, history, status=Status.CONDITION_MET, iterations=iteration
            )
        # Only a scored iteration fires a rule (an unscored one says nothing new).
        scored = bool(points) and points[-1].number == iteration
        firing = fired(self.stop_rules, points) if self.stop_rules and scored else None
        if firing is not None and firing.then == COMPLETE:
            await scope.host.note(last_stage, "stop_rule_fired", **firing.as_dict())
            return _summary(
                self.name,
                current,
                history,
                status=Status.STOP_RULE,
                iterations=iteration,
                stop_reason=firing.words,
            )
        if iteration == self.max_iterations:
            return None
        if firing is not None:  # then="gate": the rule asks, whatever `gate=` says
            await scope.host.note(last_stage, "stop_rule_fired", **firing.as_dict())
        elif not self._wants_gate(current, iteration):
            return ""
        decision = await self._ask(scope, last_stage, iteration, current, firing)
        if decision.action == GateDecision.ACCEPT:
            return _summary(
                self.name, current, history, status=Status.ACCEPTED, iterations=iteration
            )
        if decision.action == GateDecision.REJECT:
            raise GateRejected(decision, iteration)
        return decision.feedback

    async def _scored(self, scope, last_stage, iteration, current, calls, points) -> None:
        """Score the iteration (its last result), record the score on the last agent's
        iteration, and add it to `points`; a missing score is said in the run's events."""
        if self.score is None:
            return
        value, problem = await score_of(self.score, current, iteration)
        # As a YAML loop keeps them: why there is no score under "error" ("reason" is a
        # judge's word on a score), the rules in their stored form.
        detail = {"source": SOURCE, **({"error": problem} if problem else {})}
        state = {"score": SOURCE, "stop": self.stop_rules.as_dict() if self.stop_rules else {}}
        await scope.host.record_score(last_stage, iteration, value, detail, state)
        if value is None:
            await scope.host.note(last_stage, "score_missing", iteration=iteration, reason=problem)
            return
        points.append(Point(iteration, value, iteration_cost(calls)))

    async def _one_pass(
        self,
        stages,
        context: Context,
        scope: Scope,
        iteration: int,
        last_iteration,
        feedback,
        history,
    ) -> AgentResult | None:
        """One iteration: every stage in turn, each on the result of the one before (the
        first on the last iteration's); each call made is added to `history`."""
        current: AgentResult | None = None
        for index, (name, stage) in enumerate(stages):
            if index == 0 and iteration == 1:
                stage_context = context  # only here does the input reach an agent
            elif index == 0:
                stage_context = Context(previous=last_iteration, feedback=feedback)
            else:
                stage_context = Context(
                    previous=current, previous_iteration=last_iteration, feedback=feedback
                )
            current = await stage._execute(
                stage_context, scope.child(name, iteration, self.max_iterations)
            )
            history.extend(_flatten(current))
        return current

    async def _ask(self, scope: Scope, last_stage, iteration: int, current, firing=None):
        """A person's decision at the loop's gate after `iteration` (`firing`: the stop
        rule that asks, when it is one)."""
        decision = await scope.host.ask(
            GateRequest(
                path=scope.path,
                agent_path=last_stage,
                iteration=iteration,
                max_iterations=self.max_iterations,
                result=current,
                deadline=getattr(self.gate, "deadline", None),
                firing=firing,
            )
        )
        if inspect.isawaitable(decision):
            decision = await decision
        return decision


class SequentialWorkflow(_Composite):
    """Run stages one after another; each stage sees the previous stage's result."""

    def __init__(self, stages, *, name: str = "pipeline"):
        self.name = check_name(name, "workflow")
        self.stages = _stages(stages, "SequentialWorkflow")

    async def _execute(self, context: Context, scope: Scope) -> WorkflowResult:
        history: list[AgentResult] = []
        current: AgentResult | None = None
        for index, (name, stage) in enumerate(self.named_stages()):
            stage_context = context if index == 0 else Context(previous=current)
            current = await stage._execute(stage_context, scope.child(name))
            history += _flatten(current)
        return _summary(self.name, current, history)


class ParallelWorkflow(_Composite):
    """Run stages concurrently on the same context; the result gathers all their answers
    (`output` maps each stage's name to its output, `text` shows them one after another)."""

    def __init__(self, stages, *, name: str = "parallel"):
        self.name = check_name(name, "workflow")
        self.stages = _stages(stages, "ParallelWorkflow")

    async def _execute(self, context: Context, scope: Scope) -> WorkflowResult:
        named = self.named_stages()
        results = await asyncio.gather(
            *(stage._execute(context, scope.child(name)) for name, stage in named)
        )
        history = [call for result in results for call in _flatten(result)]
        usage, cost = combine_usage(history)
        pairs = [(name, result) for (name, _), result in zip(named, results, strict=True)]
        return WorkflowResult(
            agent=self.name,
            text="\n\n".join(f"## {name}\n\n{r.text}" for name, r in pairs),
            output={name: r.output for name, r in pairs},
            structured={name: r.structured for name, r in pairs},
            usage=usage,
            cost=cost,
            iteration=scope.iteration,
            duration_ms=max(r.duration_ms for r in results),
            results=history,
        )
