"""The three tools a host with a `loop` block is given, and the loop they drive.

One `LoopDriver` per host turn, behind every way the host reaches its tools (function tools
in-process, `manage.py loop tool` and MCP through the worker's socket). Calls of one turn
are taken one at a time. A refused call (an id outside the pool, a second start while a
loop is open, an iterate or finish with none open) is a ToolError the host reads; the run
goes on. Hooks run outside any transaction; each crumb is written with its transition.
"""

from __future__ import annotations

import json
import threading

from django.db import IntegrityError, transaction

from runs import budget
from runs.agent_tools import AgentTool, ToolBox, ToolContext, ToolError
from runs.executor.state import lock_run, on_fresh_connection
from runs.models import NodeRun
from runs.providers.base import Cancelled

from .hooks import HookError, Hooks, resolution
from .models import Loop, LoopClosed, LoopIteration
from .pipeline import StepError, run_pipeline

START, ITERATE, FINISH = "core_start_loop", "core_iterate_loop", "core_finish_loop"
BUDGET_STOPPED = "stopped by the run's budget"


def tool_specs(pool: list[str], max_iterations: int) -> list[tuple[str, str, dict]]:
    members = ", ".join(pool)
    return [
        (
            START,
            "Compose a pipeline of agents and run it once; each step's output feeds the next. "
            f"Agent ids, in order, from your pool: {members}. Returns loopId, iteration, "
            "maxIterations, canIterate and output.",
            {
                "type": "object",
                "properties": {
                    "pipeline": {
                        "type": "array",
                        "items": {"type": "string"},
                        "minItems": 1,
                        "description": f"Agent ids from your pool ({members}), in order",
                    },
                    "input": {"description": "The first step's input (default: your task)"},
                },
                "required": ["pipeline"],
                "additionalProperties": False,
            },
        ),
        (
            ITERATE,
            "Run the same pipeline again. With feedback the input is {previousOutput, "
            "feedback}; without, the previous output passes straight through. Past "
            f"{max_iterations} iterations this closes the loop as exhausted.",
            {
                "type": "object",
                "properties": {
                    "feedback": {
                        "type": "string",
                        "description": "What to change, for the pipeline",
                    }
                },
                "additionalProperties": False,
            },
        ),
        (
            FINISH,
            "Close the loop, recording its final judged result (default: the last output).",
            {
                "type": "object",
                "properties": {"result": {"description": "The result (default: the last output)"}},
                "additionalProperties": False,
            },
        ),
    ]


def _jsonable(value, what: str):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        raise HookError(f"{what} is not JSON: {type(value).__name__}") from None
    return value


class LoopDriver:
    def __init__(self, *, run, spec, row, host_iteration, lease, ctx):
        self.run = run
        self.spec = spec
        self.row = row
        self.host_iteration = host_iteration
        self.ctx = ctx  # the host's variables: its pipelines' agents get the same environment
        self.pool = list(spec.loop.pool)
        self.max_iterations = spec.loop.max_iterations
        self.retry = spec.loop.retry
        self.hooks = Hooks(dict(spec.loop.hooks))
        self.lock = threading.Lock()
        self.lease = lease
        # Set when the run's budget stopped it: the host's node then waits (paused, no
        # lease) for a resume, while this turn ends on its own.
        self.budget_stopped = False
        handlers = {START: self.start, ITERATE: self.iterate, FINISH: self.finish}
        context = ToolContext(
            run_id=run.pk, node_id=row.node_id, iteration_id=host_iteration.pk, role=row.node_id
        )
        self.toolbox = ToolBox(
            context,
            [
                AgentTool(name, text, schema, self._serialised(handlers[name]))
                for name, text, schema in tool_specs(self.pool, self.max_iterations)
            ],
            on_activity=self.renew,
        )

    def renew(self) -> None:
        """The host's lease, kept by every sign of life until a budget stop released it."""
        if not self.budget_stopped:
            self.lease.renew()

    def still_ours(self) -> bool:
        """The lease keeper's beat (runs.executor.lease.keep_lease): False once the node
        is no longer this execution's (cancelled, or taken back by the sweep)."""
        try:
            self.renew()
        except Cancelled:
            return False
        return True

    def _serialised(self, handler):
        def call(ctx: ToolContext, args: dict):
            with self.lock:
                try:
                    return handler(args)
                except Cancelled:
                    raise ToolError("the run was cancelled or taken over: stop here") from None

        return call

    def open_loop(self) -> Loop | None:
        return Loop.objects.filter(
            host_iteration=self.host_iteration, status=Loop.Status.OPEN
        ).first()

    # --- the tools ---------------------------------------------------------------------

    def start(self, args: dict) -> dict:
        pipeline = args["pipeline"]
        for agent in pipeline:
            if agent not in self.pool:
                raise ToolError(
                    f"{agent!r} is not in your pool ({', '.join(self.pool)}): compose the "
                    "pipeline from those agents"
                )
            if agent not in self.spec.agents:
                raise ToolError(f"{agent!r} is not a registered agent of this recipe")
        current = self.open_loop()
        if current is not None:
            raise ToolError(
                f"loop {current.pk} is still open: iterate it (core_iterate_loop) or close it "
                "(core_finish_loop) before starting another"
            )
        self._budget_allows()
        value = args["input"] if "input" in args else self.run.message
        try:
            with transaction.atomic():
                run = self._locked_run()
                loop = Loop.open(
                    run,
                    host_iteration=self.host_iteration,
                    agent=self.row.node_id,
                    pipeline=pipeline,
                    input=value,
                    max_iterations=self.max_iterations,
                )
        except IntegrityError:
            raise ToolError("another loop was opened meanwhile; iterate or finish it") from None
        try:
            self.hooks.call(
                "on_init",
                loopId=loop.pk,
                pipeline=list(pipeline),
                maxIterations=loop.max_iterations,
            )
        except HookError as exc:
            self._fail(loop, str(exc))
        return self._run_iteration(loop, value, feedback="")

    def iterate(self, args: dict) -> dict:
        loop = self._require_open()
        if loop.iteration_count >= loop.max_iterations:
            self._close_as_asked(loop, Loop.Status.EXHAUSTED, result=loop.last_output)
            return {
                "loopId": loop.pk,
                "status": loop.status,
                "iteration": loop.iteration_count,
                "iterations": loop.iteration_count,
                "maxIterations": loop.max_iterations,
                "canIterate": False,
                "result": loop.result,
            }
        self._budget_allows()
        feedback = args.get("feedback") or ""
        value = (
            {"previousOutput": loop.last_output, "feedback": feedback}
            if feedback
            else loop.last_output
        )
        return self._run_iteration(loop, value, feedback=feedback)

    def finish(self, args: dict) -> dict:
        loop = self._require_open()
        result = args.get("result")
        result = loop.last_output if result is None else result
        self._close_as_asked(loop, Loop.Status.COMPLETED, result=result)
        return {
            "loopId": loop.pk,
            "status": loop.status,
            "iterations": loop.iteration_count,
            "result": loop.result,
        }

    def _budget_allows(self) -> None:
        """The kernel's budget check before a loop iteration (runs.budget): past a limit the
        run stops as budget_exceeded, the host's node holds for the resume, and the host is
        told to end its turn. No pipeline step is cut short: this runs between iterations."""
        with transaction.atomic():
            run = self._locked_run()
            host = NodeRun.objects.select_for_update().get(pk=self.row.pk)
            if budget.allows_next_iteration(run, host, {"action": "node"}):
                return
            self.budget_stopped = True
            said = run.error
        raise ToolError(
            f"{said} No further iteration runs now: end your turn. The run goes on with a new "
            "turn of yours once an operator raises the budget and resumes."
        )

    # --- the loop ----------------------------------------------------------------------

    def _run_iteration(self, loop: Loop, value, *, feedback: str) -> dict:
        # The host's model call was a long wait, and the server may have dropped the session
        # meanwhile: each transaction runs again on a new connection (on_fresh_connection).
        it = on_fresh_connection(self._begin_iteration, loop, value, feedback)
        context = {"loopId": loop.pk, "iteration": it.number}
        try:
            self.hooks.call("on_iteration_start", **context, input=value)
            output, status, error = self._pipeline_output(loop, it, value)
            replaced = self.hooks.call("on_iteration_end", **context, output=output)
            shown = self._shown(replaced, output)
        except HookError as exc:
            self._fail(loop, str(exc), it)
        on_fresh_connection(self._end_iteration, loop, it, output, shown, status, error)
        return {
            "loopId": loop.pk,
            "iteration": it.number,
            "maxIterations": loop.max_iterations,
            "canIterate": loop.can_iterate,
            "output": shown,
        }

    def _begin_iteration(self, loop: Loop, value, feedback: str) -> LoopIteration:
        with transaction.atomic():
            run = self._locked_run()
            try:
                return loop.begin_iteration(run, input=value, feedback=feedback)
            except LoopClosed:
                raise ToolError(f"loop {loop.pk} is closed") from None

    def _end_iteration(self, loop: Loop, it: LoopIteration, output, shown, status, error):
        with transaction.atomic():
            run = self._locked_run()
            loop.end_iteration(run, it, output=output, shown=shown, status=status, error=error)

    def _pipeline_output(self, loop: Loop, it: LoopIteration, value):
        """(output, status, error) of the iteration, after on_error had its say."""
        while True:
            try:
                return run_pipeline(self, loop, it, value), LoopIteration.Status.COMPLETED, ""
            except StepError as exc:
                error = str(exc)
            answer = resolution(
                self.hooks.call("on_error", loopId=loop.pk, iteration=it.number, error=error)
            )
            if answer.action == "recover":
                output = _jsonable(answer.output, "on_error's output")
                return output, LoopIteration.Status.RECOVERED, error
            if answer.action == "retry" and it.attempts <= self.retry:
                it.retry()
                continue
            if answer.action == "retry":
                error += f" (on_error asked to retry; the loop's retry allows {self.retry})"
            elif answer.reason:
                error += f" ({answer.reason})"
            self._fail(loop, f"iteration {it.number}: the pipeline failed: {error}", it)

    def _shown(self, replaced, output):
        if replaced is None:
            return output
        if not isinstance(replaced, dict):
            raise HookError(
                f"on_iteration_end returned {type(replaced).__name__}; expected {{output}}"
            )
        if "output" not in replaced:
            return output
        return _jsonable(replaced["output"], "on_iteration_end's output")

    def _fail(self, loop: Loop, error: str, it: LoopIteration | None = None):
        if it is not None and it.status == LoopIteration.Status.RUNNING:
            it.fail(error)
        self._close(loop, Loop.Status.FAILED, error=error)
        raise ToolError(f"loop {loop.pk} failed and is closed: {error}")

    def _close(self, loop: Loop, status: str, *, result=None, error: str = "") -> str:
        """on_finish, then loop:end. A raising on_finish fails the loop: its message is
        returned (empty when the loop ended as asked)."""
        hook_error = ""
        try:
            self.hooks.call(
                "on_finish", loopId=loop.pk, status=status, iterations=loop.iteration_count
            )
        except HookError as exc:
            hook_error = str(exc)
            if status != Loop.Status.FAILED:
                status, result = Loop.Status.FAILED, None
            error = error or hook_error
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            loop.close(run, status, result=result, error=error)
        return hook_error

    def _close_as_asked(self, loop: Loop, status: str, *, result=None) -> None:
        hook_error = self._close(loop, status, result=result)
        if hook_error:
            raise ToolError(f"loop {loop.pk} failed and is closed: {hook_error}")

    def close_open(self, *, failed: bool, error: str = "") -> None:
        """The host's turn ended with a loop open: completed with its last output, or
        failed when the turn failed or the run's budget stopped it."""
        loop = self.open_loop()
        if loop is None:
            return
        if self.budget_stopped:
            self._close(loop, Loop.Status.FAILED, error=BUDGET_STOPPED)
        elif failed:
            self._close(loop, Loop.Status.FAILED, error=error)
        else:
            self._close(loop, Loop.Status.COMPLETED, result=loop.last_output)

    def _require_open(self) -> Loop:
        loop = self.open_loop()
        if loop is None:
            raise ToolError("no open loop: call core_start_loop first")
        return loop

    def _locked_run(self):
        run = lock_run(self.run.pk, with_recipe=False)
        if run.is_terminal:
            raise Cancelled(f"the run is {run.status}")
        return run
