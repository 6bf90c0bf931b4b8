"""The three tools a host with a `loop` block is given, and the loop they drive.

One `LoopDriver` per host turn, behind every way the host reaches its tools (function tools
in-process, `manage.py loop tool` and MCP through the worker's socket). Calls of one turn
are taken one at a time. A refused call (an id outside the pool, a second start while a
loop is open, an iterate or finish with none open) is a ToolError the host reads; the run
goes on. Hooks run outside any transaction; each crumb is written with its transition.

A call that changes a loop is recorded (a HostCall, in the transaction of the change). A
turn resumed after its worker was lost (loops/driven/runner.py) takes over the lost turn's
loops and record: `go_on_after_loss` re-runs the iteration that was in flight, the host is
told what the lost attempt did, and the calls it makes again in the same order are answered
from the record, not run again (`_replayed`); the first call that differs runs, and every
one after it.
"""

from __future__ import annotations

import json
import threading

from django.db import IntegrityError, transaction

from runs import budget
from runs.agent_tools import AgentTool, ToolBox, ToolContext, ToolError
from runs.executor.state import lock_run, on_fresh_connection
from runs.models import Iteration, NodeRun
from runs.providers.base import Cancelled

from .hooks import HookError, Hooks, resolution
from .models import HostCall, Loop, LoopClosed, LoopIteration
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
        # The host's call being made (name, arguments) and its record once it changed a loop.
        self.calling: tuple[str, dict] | None = None
        self.entry: HostCall | None = None
        # What this turn took over from a lost one, and how much of it was made again.
        self.record = list(HostCall.objects.filter(host_iteration=host_iteration).order_by("seq"))
        self.replayed = 0
        handlers = {START: self.start, ITERATE: self.iterate, FINISH: self.finish}
        context = ToolContext(
            run_id=run.pk, node_id=row.node_id, iteration_id=host_iteration.pk, role=row.node_id
        )
        self.toolbox = ToolBox(
            context,
            [
                AgentTool(name, text, schema, self._serialised(name, handlers[name]))
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

    def _serialised(self, name: str, handler):
        def call(ctx: ToolContext, args: dict):
            with self.lock:
                recorded = self._replayed(name, args)
                if recorded is not None:
                    return recorded_answer(recorded)
                self.calling, self.entry = (name, args), None
                try:
                    return handler(args)
                except Cancelled:
                    raise ToolError("the run was cancelled or taken over: stop here") from None
                finally:
                    self.calling = self.entry = None

        return call

    # --- the record --------------------------------------------------------------------

    def _replayed(self, name: str, args: dict) -> HostCall | None:
        """The recorded call this one makes again (the next of the record, same name and
        arguments), or None: it runs, and so does every call after it."""
        if self.replayed < len(self.record):
            entry = self.record[self.replayed]
            if entry.name == name and entry.arguments == args:
                self.replayed += 1
                return entry
            self.replayed = len(self.record)
        return None

    def _note(self, loop: Loop, iteration: int | None = None) -> None:
        """Inside the transaction that changes `loop` for the host's call being made: its
        record, written once (again only when a retried transaction lost the first)."""
        if self.calling is None:
            return  # not the host's call (a fork's iteration, the turn's end)
        if self.entry is not None and HostCall.objects.filter(pk=self.entry.pk).exists():
            if iteration is not None:
                HostCall.objects.filter(pk=self.entry.pk).update(iteration=iteration)
                self.entry.iteration = iteration
            return
        name, args = self.calling
        turn = self.host_iteration
        self.entry = HostCall.objects.create(
            run_id=self.run.pk,
            host_iteration=turn,
            seq=HostCall.objects.filter(host_iteration=turn).count() + 1,
            name=name,
            arguments=args,
            loop=loop,
            iteration=iteration,
        )

    def go_on_after_loss(self) -> list[tuple[HostCall, dict | str]]:
        """This turn took over from one whose worker was lost: the loop iteration that was
        in flight runs again (the steps it finished are kept: pipeline.finished_steps), as
        the recorded call that began it. Returns the record with what each call answered
        (an answer, or a refusal's words), for the host's prompt."""
        loop = self.open_loop()
        if loop is not None:
            running = loop.iterations.filter(status=LoopIteration.Status.RUNNING).first()
            if running is not None or loop.iteration_count == 0:
                with self.lock:
                    self._again(loop, running)
        self.record = list(
            HostCall.objects.filter(host_iteration=self.host_iteration).order_by("seq")
        )
        told = []
        for entry in self.record:
            try:
                told.append((entry, recorded_answer(entry)))
            except ToolError as exc:
                told.append((entry, str(exc)))
        return told

    def _again(self, loop: Loop, running: LoopIteration | None) -> None:
        number = running.number if running is not None else None
        began = [e for e in self.record if e.loop_id == loop.pk and e.iteration == number]
        self.entry = began[-1] if began and began[-1].name != FINISH else None
        self.calling = (self.entry.name, self.entry.arguments) if self.entry else None
        try:
            if running is not None:
                self._run_iteration(loop, running.input, feedback=running.feedback, again=running)
            else:  # opened, its first iteration not begun
                self._run_iteration(loop, loop.input, feedback="")
        except ToolError:
            pass  # the loop failed and is closed: its record says so
        finally:
            self.calling = self.entry = None

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
                self._note(loop)
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
            return closed_answer(ITERATE, loop)
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
        return closed_answer(FINISH, loop)

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

    def _run_iteration(self, loop: Loop, value, *, feedback: str, again=None) -> dict:
        """Run an iteration of the pipeline: a new one, or `again` (the one a lost worker
        left running) once more."""
        # The host's model call was a long wait, and the server may have dropped the session
        # meanwhile: each transaction runs again on a new connection (on_fresh_connection).
        it = again or on_fresh_connection(self._begin_iteration, loop, value, feedback)
        context = {"loopId": loop.pk, "iteration": it.number}
        try:
            self.hooks.call("on_iteration_start", **context, input=value)
            output, status, error = self._pipeline_output(loop, it, value)
            replaced = self.hooks.call("on_iteration_end", **context, output=output)
            shown = self._shown(replaced, output)
        except HookError as exc:
            self._fail(loop, str(exc), it)
        on_fresh_connection(self._end_iteration, loop, it, output, shown, status, error)
        return iteration_answer(loop, it)

    def _begin_iteration(self, loop: Loop, value, feedback: str) -> LoopIteration:
        with transaction.atomic():
            run = self._locked_run()
            try:
                it = loop.begin_iteration(run, input=value, feedback=feedback)
                self._note(loop, it.number)
                return it
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
        returned (empty when the loop ended as asked). A loop that already ended (with
        its run: Loop.close_with_run) is left as it is, with no hook after its loop:end."""
        hook_error = ""
        if not Loop.objects.filter(pk=loop.pk, status=Loop.Status.OPEN).exists():
            return hook_error
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
            self._note(loop)
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
        """The run, locked, while this turn may still change its loops: not once the run
        ended, nor once another execution took this turn over (`runner._begin_turn` failed
        it: the sweep took the node back from a worker that was slow, not dead)."""
        run = lock_run(self.run.pk, with_recipe=False)
        if run.is_terminal:
            raise Cancelled(f"the run is {run.status}")
        if not Iteration.objects.filter(
            pk=self.host_iteration.pk, status=Iteration.Status.RUNNING
        ).exists():
            raise Cancelled("another execution took this host turn over")
        return run


# --- what a call answered, read from the loop's rows (live, and replayed from the record) --


def iteration_answer(loop: Loop, it: LoopIteration) -> dict:
    """A start's or an iterate's answer: the iteration it ran (the loop was open after it)."""
    return {
        "loopId": loop.pk,
        "iteration": it.number,
        "maxIterations": loop.max_iterations,
        "canIterate": it.number < loop.max_iterations,
        "output": it.shown,
    }


def closed_answer(name: str, loop: Loop) -> dict:
    """A finish's answer, or an iterate's past the cap (the loop closed as exhausted)."""
    if name == FINISH:
        keys = ("loopId", "status", "iterations", "result")
    else:
        keys = (
            "loopId",
            "status",
            "iteration",
            "iterations",
            "maxIterations",
            "canIterate",
            "result",
        )
    answer = {
        "loopId": loop.pk,
        "status": loop.status,
        "iteration": loop.iteration_count,
        "iterations": loop.iteration_count,
        "maxIterations": loop.max_iterations,
        "canIterate": False,
        "result": loop.result,
    }
    return {key: answer[key] for key in keys}


def recorded_answer(entry: HostCall) -> dict:
    """What a recorded call answered, from the rows it changed; a ToolError when it closed
    its loop as failed (the words it was refused with)."""
    loop = Loop.objects.get(pk=entry.loop_id)
    failed = ToolError(f"loop {loop.pk} failed and is closed: {loop.error}")
    if entry.iteration is not None:
        it = loop.iterations.get(number=entry.iteration)
        if it.answered:
            return iteration_answer(loop, it)
        raise failed
    if loop.status == Loop.Status.FAILED or entry.name == START:
        raise failed  # a start whose loop failed before its first iteration (on_init)
    return closed_answer(entry.name, loop)
