"""One run of a loop's pipeline: its agents in order, each step's output the next one's
input. Each step is an Iteration of the agent's own row (`researcher`, `drafter`, ...; the
host's own row when the host is a step of its pipeline), claimed as it is created, its
output streamed live and recorded like any agent call."""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import OutputStream
from runs.models import Iteration, NodeRun
from runs.providers import registry
from runs.providers.base import Cancelled, ProviderError

from .prompts import step_prompt
from .spec import PIPELINE_STEP

log = logging.getLogger(__name__)


class StepError(Exception):
    """A step of the pipeline failed; the message names the agent and says why."""


def agent_row(run, agent_id: str) -> NodeRun:
    """The agent's row (created on first use), locked; after a resume, its newest."""
    row = (
        NodeRun.objects.select_for_update()
        .filter(run=run, node_id=agent_id, iteration=0)
        .order_by("-generation")
        .first()
    )
    if row is None:
        # Pending until its first call starts it (`begin_call`: NodeRun.start_iteration).
        row = NodeRun.objects.create(
            run=run, node_id=agent_id, kind=PIPELINE_STEP, started_at=timezone.now()
        )
    elif row.is_terminal:  # ended with an earlier turn (before a resume): at work again
        if not row.reopen():  # locked above: only a row deleted meanwhile stays put
            raise RuntimeError(f"agent row {row.pk} of run {run.pk} could not be reopened")
    return row


def begin_call(run_id: int, agent_id: str, prompt: str) -> Iteration:
    """A new iteration of the agent's row, created and started here (no lease of its own:
    the driven node holds the lease for all of its work)."""
    with transaction.atomic():
        run = lock_run(run_id, with_recipe=False)
        if run.is_terminal:
            raise Cancelled(f"the run is {run.status}")
        row = agent_row(run, agent_id)
        done = row.iterations.filter(generation=row.generation).aggregate(n=Max("number"))["n"]
        it = row.start_iteration(run, (done or 0) + 1, here=True)
        if not it.start(run, prompt, leased=False):
            raise Cancelled("the step was cancelled")
        return it


def run_pipeline(driver, loop, loop_iteration, value):
    """The pipeline's output. Run again after a lost worker (loops/driven/driver.py:
    go_on_after_loss), the steps this attempt of the iteration finished are not: their
    outputs go on."""
    kept = finished_steps(driver.spec, loop, loop_iteration)
    for agent_id in loop.pipeline[len(kept) :]:
        value = run_step(driver, loop_iteration, agent_id, kept[-1] if kept else value)
        kept.append(value)
    return kept[-1]


def finished_steps(spec, loop, loop_iteration) -> list:
    """The outputs of the pipeline's leading steps that this attempt of the iteration
    finished, in order (a step whose call failed or was lost ran again after it)."""
    noted = [s for s in loop_iteration.steps if s["attempt"] == loop_iteration.attempts]
    done = Iteration.objects.filter(
        pk__in=[s["iteration"] for s in noted], status=Iteration.Status.COMPLETED
    ).in_bulk()
    passed = []
    for step in noted:
        call = done.get(step["iteration"])
        if call is None:
            continue
        if loop.pipeline[len(passed) : len(passed) + 1] != [step["agent"]]:
            break
        passed.append(_answer(spec.agents[step["agent"]], call))
    return passed


def _answer(agent, call: Iteration):
    """What a finished step passed on, as run_step returns it: its structured output, or
    the text its row keeps."""
    return call.structured if agent.output_schema else call.output


def run_step(driver, loop_iteration, agent_id: str, value):
    spec, run = driver.spec, driver.run
    agent = spec.agents[agent_id]
    try:
        # The step's first database read: a session dropped since the last step is
        # replaced here (a read, safe to run again), not reported as the host's crash.
        provider = on_fresh_connection(registry.resolve, agent.provider or spec.provider, spec, run)
        prompt = prepare_prompt(step_prompt(agent, value), provider, agent.output_schema)
    except ProviderError as exc:
        raise StepError(f"{agent_id}: {exc}") from None
    it = on_fresh_connection(begin_call, run.pk, agent_id, prompt)
    on_fresh_connection(loop_iteration.add_step, agent_id, it.pk)
    stream = OutputStream(Iteration, it.pk, it.attempts, run.pk, lease=False)

    def on_chunk(chunk: str) -> None:
        stream(chunk)
        driver.toolbox.touch()  # the host's lease, and its wait for this tool call

    request = request_for(
        run,
        agent,
        prompt,
        spec=spec,
        node_id=agent_id,
        iteration=it.number,
        schema=agent.output_schema,
        ctx=driver.ctx,
    )
    try:
        # What goes on to the next step (or back to the host) is what the run keeps.
        outcome = run_call(provider, request, stream, on_chunk=on_chunk)
    except Cancelled:
        raise  # what it printed stays on the cancelled step (run_call)
    except (StepFailed, ProviderError) as exc:
        on_fresh_connection(_failed, it, str(exc), stream)
        raise StepError(f"{agent_id}: {exc}") from None
    except Exception as exc:  # an agent's crash is this step's error
        log.exception("driven step %s of run %s crashed", agent_id, run.pk)
        on_fresh_connection(_failed, it, f"{type(exc).__name__}: {exc}", stream)
        raise StepError(f"{agent_id}: {type(exc).__name__}: {exc}") from None
    if outcome.result.timed_out:
        on_fresh_connection(_failed, it, "the agent went silent (idle timeout)", stream, True)
        raise StepError(f"{agent_id}: the agent went silent for {request.idle_timeout:.0f}s")
    on_fresh_connection(_done, it, outcome)
    return outcome.payload if agent.output_schema else outcome.text


def _done(it: Iteration, outcome) -> None:
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        if not it.complete(run, outcome):
            raise Cancelled("the step was cancelled")
        NodeRun.objects.filter(pk=it.node_run_id).update(
            output=outcome.text, structured=outcome.payload, **outcome.fields
        )


def _failed(it: Iteration, error: str, stream: OutputStream, timed_out: bool = False) -> None:
    raw = stream.text
    with transaction.atomic():
        run = lock_run(it.run_id, with_recipe=False)
        it.fail(run, error, timed_out=timed_out, raw_output=raw, output=raw, **stream.fields())
