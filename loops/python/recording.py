"""The recording host: a Python workflow's calls, checks and gates on the run kernel.

A Python run is a Run whose recipe has one node, `workflow` (kind `python`), claimed like
any node: by a worker (loops.python.runner) or by the script that called `run()`
(`NodeRun.objects.create_claimed`). Each agent call is an Iteration of the agent's own
NodeRun (`writer`, `analysis.market`, ...), numbered by the enclosing loop's iteration,
created by `NodeRun.start_iteration(here=True)`, taken by `Iteration.objects.claim` and
ended by `Iteration.finish`, like any loop's. The `workflow` row holds the only lease,
renewed by the kernel's stream while an agent writes (agent iterations hold none), so the
sweep only ever re-sends the `workflow` node, whose next execution replays what is
recorded: a completed iteration is returned as recorded instead of calling its agent
again, a decided gate as decided. So a killed worker costs at most the agent call it was
in.

At a gate (`NodeRun.pause`) a worker does not wait: it suspends the `workflow` row
(`NodeRun.suspend`) and ends its task; the decision wakes the node (`gate_decided`). A
script waits for the decision (`Gate.wait_decided`).
"""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction

from loops.python.format import NODE_ID
from runs import budget
from runs.executor.context import run_dirs
from runs.executor.state import lock_run, on_fresh_connection
from runs.executor.stream import OutputStream, renew_lease
from runs.models import Gate, Iteration, NodeRun, Run
from runs.providers.base import Cancelled

from .agents import Agent, call_provider
from .context import Scope
from .gates import decision_of, gate_message
from .hosts import resolve_provider
from .records import jsonable, recorded_result
from .results import (
    AgentFailed,
    AgentResult,
    GateDecision,
    GateRequest,
    RunCancelled,
    WorkflowError,
)


async def in_thread(work, *args):
    """Database work off the event loop, in a pool thread whose connection is closed after
    (pool threads come and go; an open connection would outlive its thread)."""

    def closing():
        try:
            return work(*args)
        finally:
            connection.close()

    return await asyncio.to_thread(closing)


async def db_step(work, *args):
    """`in_thread` for one database step: a connection dropped under it (a restarted
    server, a terminated session) costs a retry on a new one, as a workflow iteration's
    steps do (`on_fresh_connection`), not the run."""
    return await in_thread(on_fresh_connection, work, *args)


HELD_BY_BUDGET = object()


class Suspended(Exception):  # control flow, not an error
    """A worker reached an undecided gate: stop here, the decision re-sends the node."""


def node_id_for(agent: Agent, scope: Scope) -> str:
    return ".".join(scope.path) or agent.name


def agent_row(run: Run, node_id: str) -> NodeRun | None:
    """An agent's row, locked; after a resume, its newest generation."""
    return (
        NodeRun.objects.select_for_update()
        .filter(run=run, node_id=node_id, iteration=0)
        .order_by("-generation")
        .first()
    )


class RecordingHost:
    def __init__(self, run: Run | None = None, workflow_row: NodeRun | None = None):
        """With a claimed `workflow` row (a worker), execute it; without (a script), start
        a run of the script's recipe on `open` and hold its node here."""
        self.waits_at_gates = run is None  # a script waits; a worker suspends
        self.run = run
        self.row = workflow_row

    # --- lifecycle ------------------------------------------------------------------

    async def open(self, root, text: str) -> None:
        if self.run is None:
            from .script import start_script_run

            self.run, self.row = await in_thread(start_script_run, root, text)
        self.attempt = self.row.attempts
        self.workdir = str(run_dirs(self.run)[0])

    async def close(self, result=None, error: BaseException | None = None) -> None:
        if isinstance(error, Suspended | RunCancelled):
            return
        if isinstance(error, OperationalError | InterfaceError):
            # The database out of reach even after a retry: not the workflow's fault. The
            # node's lease runs out and the sweep sends it again; the replay goes on.
            return
        if error is None:
            await db_step(self._complete, result)
        elif isinstance(error, Exception):
            await db_step(self._fail, error)

    @property
    def lease(self) -> tuple:
        """The `workflow` row's lease, as the kernel's stream renews it."""
        return (NodeRun, self.row.pk, self.attempt)

    def _keep_lease(self) -> None:
        """Renew the `workflow` row's lease; losing it (cancelled, or taken over after a
        stall) stops this execution here."""
        if not renew_lease(*self.lease):
            raise RunCancelled("the run was cancelled or taken over")

    def _workflow_row(self) -> NodeRun:
        return NodeRun.objects.select_for_update().get(pk=self.row.pk)

    def _complete(self, result) -> None:
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            if run.is_terminal:
                return
            row = self._workflow_row()
            # How it ended, and for a stop rule which and why (the firing's words).
            said = {
                "ended": getattr(result, "status", "completed"),
                "iterations": getattr(result, "iterations", 1),
            }
            if getattr(result, "stop_reason", ""):
                said["stop_reason"] = result.stop_reason
            ended = {"state": {**row.state, **said}, "iteration_count": said["iterations"]}
            if not row.complete(
                run,
                result.text,
                jsonable(result.structured),
                attempt=self.attempt,
                columns=ended,
                **said,
            ):
                return  # taken over meanwhile: the execution that holds it reports
            NodeRun.objects.filter(run=run, kind="agent").close_open(NodeRun.Status.COMPLETED)
            run.update_status(finished=True, **said)

    def _fail(self, error: Exception) -> None:
        if isinstance(error, WorkflowError):
            message = str(error)
        else:
            message = f"the workflow raised {type(error).__name__}: {error}"
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            if run.is_terminal:
                return
            if self._workflow_row().fail(run, message, attempt=self.attempt):
                # Its agents' rows, and a parallel branch still in a call, stop with it.
                run.fail(message)

    # --- agent calls ----------------------------------------------------------------

    async def call(self, agent: Agent, scope: Scope, prompt: str, feedback="") -> AgentResult:
        return await in_thread(self._call, agent, scope, prompt, feedback)

    def _call(self, agent: Agent, scope: Scope, prompt: str, feedback="") -> AgentResult:
        node_id = node_id_for(agent, scope)
        # The feedback a person gave at the gate before this iteration: the call's card shows
        # it ("Feedback that started it"), as a YAML loop's iteration does.
        began = on_fresh_connection(self._begin, agent, node_id, scope, prompt, feedback)
        if began is HELD_BY_BUDGET:
            # The run stopped before this call; a resume sends the workflow node back to a
            # worker, whose replay reaches this call again.
            if self.waits_at_gates:
                raise RunCancelled("the run stopped at its budget")
            raise Suspended()
        if isinstance(began, AgentResult):
            return began  # recorded by an earlier execution: replayed, not re-asked
        it = began
        stream = OutputStream(Iteration, it.pk, it.attempts, self.run.pk, holder=self.lease)
        try:
            result = call_provider(
                agent,
                on_fresh_connection(resolve_provider, agent.provider, self.run),
                prompt,
                iteration=scope.iteration,
                workdir=self.workdir,
                output=stream,
                run=self.run,
                node_id=node_id,
            )
        except Cancelled:  # what the agent printed stays on the cancelled call (run_call)
            raise RunCancelled("the run was cancelled") from None
        except (OperationalError, InterfaceError):
            raise  # the database, not the agent: the sweep re-sends the node (see `close`)
        except Exception as exc:
            on_fresh_connection(self._call_failed, it, str(exc), stream)
            if isinstance(exc, WorkflowError):
                raise
            raise AgentFailed(f"agent {agent.name!r}: {type(exc).__name__}: {exc}") from exc
        on_fresh_connection(self._call_done, it, result, stream)
        return result

    def _begin(self, agent: Agent, node_id: str, scope: Scope, prompt: str, feedback=""):
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            if run.is_terminal:
                raise RunCancelled(f"the run is {run.status}")
            self._keep_lease()
            row = agent_row(run, node_id)
            if row is None:
                row = NodeRun.objects.create(
                    run=run,
                    node_id=node_id,
                    kind="agent",
                    max_iterations=scope.max_iterations,
                    state={"provider": agent.provider_name},
                )
            it = Iteration.objects.filter(
                node_run=row, generation=row.generation, number=scope.iteration
            ).first()
            if it is not None and it.status in Iteration.ANSWERED:
                return recorded_result(agent, it)
            if it is None:
                if not self._budget_allows(run):
                    return HELD_BY_BUDGET
                if row.is_terminal:  # its last call failed and the script calls it again
                    row.reopen()
                it = row.start_iteration(run, scope.iteration, here=True, feedback=feedback)
                if it is None:
                    raise RunCancelled(f"agent {node_id} has ended")
            # Else an earlier execution died in this call (this one holds the workflow
            # node now): the claim below takes the iteration over and the call is made again.
            if not it.start(run, prompt, None, leased=False, take_over=True):
                raise RunCancelled("the call was cancelled")
            return it

    def _call_done(self, it: Iteration, result: AgentResult, stream: OutputStream) -> None:
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            # The answer as the script got it (its structured output made JSON-safe).
            if run.is_terminal or not it.complete(
                run, result.record, structured=jsonable(result.structured)
            ):
                if it.finished_as(Iteration.ANSWERED):
                    return  # recorded by a try whose commit this one did not see
                raise RunCancelled("the run was cancelled")
            # The agent's latest answer, as its node shows it (not a status change).
            NodeRun.objects.filter(pk=it.node_run_id).update(
                output=it.output, structured=it.structured, **stream.fields()
            )
        # The call's duration as the run keeps it (a replay reads the same).
        result.duration_ms = it.duration_ms or 0

    def _call_failed(self, it: Iteration, error: str, stream: OutputStream) -> None:
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            if run.is_terminal or not it.fail(
                run, error, raw_output=stream.text, **stream.fields()
            ):
                return
            row = NodeRun.objects.select_for_update().get(pk=it.node_run_id)
            row.fail(run, f"iteration {it.number} failed: {error}")

    def _budget_allows(self, run: Run) -> bool:
        """The kernel's budget check before a new agent call; when it says stop, the
        `workflow` node waits, holding no lease, until the run is resumed."""
        workflow = NodeRun.objects.select_for_update().get(pk=self.row.pk)
        return budget.allows_next_iteration(run, workflow, {"action": "node"})

    # --- a fork's continuation (loops.python.forking) --------------------------------

    async def forked_feedback(self, path: tuple[str, ...], iteration: int) -> str | None:
        """At the fork point of a forked run (the loop around the forked agent, at its
        iteration): the fork's feedback, once per execution; None everywhere else."""
        fork = self.run.fork_point or {}
        if not fork or getattr(self, "_fork_delivered", False):
            return None
        forked_path = tuple(fork["node"].split("."))
        if forked_path[: len(path)] != tuple(path) or iteration != fork["iteration"]:
            return None
        self._fork_delivered = True
        return fork.get("feedback") or ""

    def forked_prompt(self, node_id: str, iteration: int) -> str | None:
        fork = self.run.fork_point or {}
        if fork.get("prompt") and node_id == fork["node"] and iteration > fork["iteration"]:
            return fork["prompt"]
        return None

    # --- checks and gates -----------------------------------------------------------

    async def note(self, path: tuple[str, ...], kind: str, **data) -> None:
        def work():
            with transaction.atomic():
                run = lock_run(self.run.pk, with_recipe=False)
                step = ".".join(path) or NODE_ID
                # An execution that replays a recorded run must not log its checks twice.
                seen = run.events.filter(kind=kind, step=step, data__iteration=data["iteration"])
                if not run.is_terminal and not seen.exists():
                    run.append_event(kind, step, **data)

        await db_step(work)

    async def record_score(
        self, agent_path: tuple[str, ...], iteration: int, score, detail: dict, state: dict
    ) -> None:
        """A loop's score for `iteration`, on its last agent's call of that iteration, and
        how the loop is scored and stopped (`state`: "score", "stop") on the agent's row,
        where the pages and the inbox read them. A replay writes the same again."""

        def work():
            with transaction.atomic():
                run = lock_run(self.run.pk, with_recipe=False)
                row = None if run.is_terminal else agent_row(run, ".".join(agent_path))
                if row is None:
                    return  # ended, or the loop's last stage is a workflow: no row of its own
                if any(row.state.get(key) != value for key, value in state.items()):
                    NodeRun.objects.filter(pk=row.pk).update(state={**row.state, **state})
                Iteration.objects.filter(
                    node_run=row, generation=row.generation, number=iteration
                ).update(score=score, score_detail=detail)

        await db_step(work)

    async def ask(self, request: GateRequest) -> GateDecision:
        gate = await db_step(self._gate, request)
        if isinstance(gate, GateDecision):
            return gate
        every = max(1.0, settings.LOOP_LEASE_SECONDS / 3)
        decided = await in_thread(
            lambda: gate.wait_decided(every=every, still_ours=self._keep_lease)
        )
        return decision_of(decided)

    def _gate(self, request: GateRequest) -> GateDecision | Gate:
        """The decision at this gate if there is one; else open the gate (once) and, in a
        worker, suspend; a script gets the pending gate to wait on."""
        with transaction.atomic():
            run = lock_run(self.run.pk, with_recipe=False)
            if run.is_terminal:
                raise RunCancelled(f"the run is {run.status}")
            node_id = ".".join(request.agent_path)
            row = agent_row(run, node_id)
            it = Iteration.objects.get(
                node_run=row, generation=row.generation, number=request.iteration
            )
            gate = Gate.objects.filter(node_run=row, iteration=it).order_by("-id").first()
            if gate is not None and gate.status != Gate.Status.PENDING:
                return decision_of(gate)
            if gate is None:
                gate = row.pause(
                    run,
                    kind=Gate.Kind.LOOP,
                    message=gate_message(request),
                    iteration=it,
                    fired=[f"stop:{request.firing.rule}"] if request.firing else ["gate"],
                    deadline=request.deadline,
                )
                if gate is None:
                    raise RunCancelled(f"agent {node_id} has ended")
            if self.waits_at_gates:
                return gate
            self._workflow_row().suspend(run, attempt=self.attempt)
        raise Suspended()  # after the commit: the gate and the pause must stay
