"""A workflow loop's score for one iteration (`score:`, recipes/formats/scoring.py) and the
stop rule its scores fire (`stop:`, runs/engine/stop_rules.py).

The score is taken in the worker after the agent answered, from reads and sandboxed work
only: a field of the structured answer, the last number a sandboxed command prints,
or a judge: an agent call of its own, with its own provider, asked for `{score, reason}`.
A command reads the answer on its standard input (any size, and never pasted into the
command).
A score that cannot be taken is no score (the iteration keeps why); the loop goes on by
its other conditions.
"""

from __future__ import annotations

import json
import re
from decimal import Decimal

from console.redact import plain_cause
from runs.engine.stop_rules import Firing, Point, as_score, fired, rules_from
from runs.engine.variables import substitute_shell
from runs.executor.agent import prepare_prompt, request_for, run_call
from runs.executor.context import step_env, step_sandbox
from runs.models import Iteration
from runs.providers import registry
from runs.providers.base import ProviderError
from runs.sandbox import run_process

JUDGE_SCHEMA = {
    "type": "object",
    "properties": {"score": {"type": "number"}, "reason": {"type": "string"}},
    "required": ["score"],
}
# The judge sees the answer it scores; an answer longer than this is cut (and says so).
JUDGE_ANSWER_CHARS = 50_000
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
DETAIL_TEXT = 500


def take_score(it: Iteration, spec, node, ctx, outcome, stream) -> dict:
    """The iteration's score columns (`score`, `score_detail`; a judge's cost is added to
    the iteration's own), or {} for a loop that is not scored."""
    declared = node.loop.score
    if not declared:
        return {}
    source = next(iter(declared))
    try:
        if source == "field":
            value, detail = _from_field(declared["field"], outcome.payload), {}
        elif source == "bash":
            value, detail = _from_command(
                declared["bash"], it.run, spec, node, ctx, outcome, stream
            )
        else:
            value, detail = _from_judge(declared["judge"], it, spec, node, ctx, outcome, stream)
    except ProviderError as exc:
        value, detail = None, {"error": f"the judge failed: {plain_cause(exc)}"[:DETAIL_TEXT]}
    columns = {"score": value, "score_detail": {"source": source, **detail}}
    judge_cost = detail.get("judge", {}).get("cost_usd")
    if judge_cost is not None:
        own = outcome.result.cost_usd
        columns["cost_usd"] = (own or Decimal(0)) + Decimal(judge_cost)
    return columns


def _from_field(name: str, payload) -> float | None:
    return as_score(payload.get(name)) if isinstance(payload, dict) else None


def _from_command(script, run, spec, node, ctx, outcome, stream) -> tuple[float | None, dict]:
    """The last number the command prints, given the answer on its standard input; its exit
    code must be 0."""
    command, values = substitute_shell(script, ctx)
    result = run_process(
        ["bash", "-c", command],
        sandbox=step_sandbox(run, spec, node),
        stdin_text=outcome.text,
        env={**step_env(run, ctx), **values},
        on_chunk=lambda chunk: stream(""),
    )
    if result.exit_code != 0:
        return None, {"error": f"the score command exited {result.exit_code}"}
    numbers = NUMBER.findall(result.output or "")
    if not numbers:
        return None, {"error": "the score command printed no number"}
    return as_score(float(numbers[-1])), {}


def _from_judge(judge: dict, it, spec, node, ctx, outcome, stream) -> tuple[float | None, dict]:
    provider = registry.resolve(
        judge.get("provider") or node.provider or spec.provider, spec, it.run
    )
    answer = outcome.text
    if len(answer) > JUDGE_ANSWER_CHARS:
        answer = answer[:JUDGE_ANSWER_CHARS] + "\n[the rest of the answer was cut]"
    prompt = (
        f"{judge['rubric']}\n\nScore the answer below by that rubric. Reply with JSON "
        '{"score": <number>, "reason": "<one sentence>"}.\n\n'
        f"--- the answer ---\n{answer}\n--- end of the answer ---"
    )
    request = request_for(
        it.run,
        node,
        prepare_prompt(prompt, provider, JUDGE_SCHEMA),
        spec=spec,
        node_id=it.node_run.node_id,
        iteration=it.number,
        model=judge.get("model"),
        schema=JUDGE_SCHEMA,
        ctx=ctx,
    )
    verdict = run_call(provider, request, lambda chunk: stream(""))
    usage = {
        "provider": getattr(provider, "name", ""),
        "tokens_in": verdict.result.tokens_in,
        "tokens_out": verdict.result.tokens_out,
        "cost_usd": str(verdict.result.cost_usd) if verdict.result.cost_usd is not None else None,
    }
    payload = verdict.payload if isinstance(verdict.payload, dict) else {}
    reason = payload.get("reason")
    detail = {"judge": usage}
    if isinstance(reason, str) and reason.strip():
        detail["reason"] = reason.strip()[:DETAIL_TEXT]
    value = as_score(payload.get("score"))
    if value is None:
        detail["error"] = "the judge gave no number: " + json.dumps(payload)[:DETAIL_TEXT]
    return value, detail


def stop_firing(row, loop, it: Iteration) -> Firing | None:
    """The stop rule the loop's scores fire after `it` (the caller holds the run's lock and
    `it` is complete), or None."""
    if not loop.stop or it.score is None:
        return None
    scored = (
        Iteration.objects.filter(node_run_id=row.pk, score__isnull=False, number__lte=it.number)
        .exclude(pk=it.pk)
        .filter(status__in=[Iteration.Status.COMPLETED, Iteration.Status.TIMED_OUT])
        .order_by("number", "id")
        .values_list("number", "score", "cost_usd")
    )
    latest = {number: Point(number, score, cost) for number, score, cost in scored}
    latest[it.number] = Point(it.number, it.score, it.cost_usd)
    return fired(rules_from(loop.stop), [latest[n] for n in sorted(latest)])
