"""The orchestration MCP server: tools an outside agent uses to follow and steer runs.

Built on the official MCP SDK (`mcp`, its MCPServer). Served over stdio by `manage.py mcp`
and over streamable HTTP at /mcp (runs.orchestration.http). Every change goes through
runs.services with surface "mcp", like every other surface; who calls is the caller the
transport gives (`Caller`): the API token's person over HTTP, `--user` over stdio. A
read needs the viewer role (a token's read scope), a change the operator role (a token's
operate scope).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from django.conf import settings
from django.db.models import Prefetch
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from console.api_errors import require
from runs import services, waiting
from runs.actor import Actor
from runs.inbox import ranked_attention
from runs.models import Gate, Run
from runs.orchestration.state import gate_state, run_row, run_state, run_url
from runs.queries import take_page

INSTRUCTIONS = """Loop Console runs loops of AI agent iterations that pause at gates for a
decision. Use inbox to see what needs attention first (gates by deadline, runs by burn
rate, loops about to plateau, each with its reason), list_gates to find runs waiting for
you, get_gate to read a gate's structured state (the iteration, completionSignaled, an
output excerpt and what an approve would do), then approve with accept: true to finalize a
completed iteration, or with feedback to run another iteration; reject fails the step.
start_run starts a recipe, cancel_run stops a run; wait_for_run waits until a run needs you
or ends, instead of polling get_run."""

RunId = Annotated[int, Field(ge=1, description="The run's id")]
GateId = Annotated[
    int | None,
    Field(ge=1, description="The gate you read; refused if it is no longer pending"),
]
Reason = Annotated[str, Field(description="Why; kept on the run")]
Accept = Annotated[
    bool, Field(description="true: finalize (accept the iteration, or the approval)")
]
Feedback = Annotated[str, Field(description="Iterate: run another iteration with this feedback")]


@dataclass(frozen=True)
class Caller:
    """Who calls the tools: `user` (None for a stdio server with no account: the command
    line itself, named `label`)."""

    user: object | None
    label: str = "mcp"

    def may_read(self) -> None:
        if self.user is not None:
            require(self.user, "runs.view_run")

    def runs(self):
        """The runs it may read: those of its projects (a stdio server with no account:
        all of them, as the command line sees them)."""
        found = Run.objects.select_related("recipe", "recipe_version", "started_by")
        return found if self.user is None else found.visible_to(self.user)

    def run(self, run_id: int) -> Run:
        """Run `run_id`; one of a project the caller sees nothing of reads as missing."""
        found = self.runs().filter(pk=run_id).first()
        if found is None:
            raise ToolError(f"No run {run_id}.")
        return found

    def recipe(self, slug: str):
        from recipes.models import Recipe

        found = Recipe.objects.all() if self.user is None else Recipe.objects.visible_to(self.user)
        found = found.filter(slug=slug).first()
        if found is None:
            raise ToolError(f"No recipe '{slug}'.")
        return found

    def actor(self) -> Actor:
        if self.user is None:
            return Actor("mcp", label=self.label)
        require(self.user, "runs.operate_run")  # says which scope a token lacks
        return Actor("mcp", self.user)


class CallerOf:
    """How the tools learn their caller: over HTTP each request carries its own (set by
    runs.orchestration.http on the request's scope), over stdio it is fixed."""

    SCOPE_KEY = "loop_console.caller"

    def __init__(self, fixed: Caller | None = None):
        self.fixed = fixed

    def __call__(self, ctx: Context) -> Caller:
        request = ctx.request_context.request
        scope = getattr(request, "scope", None)
        caller = scope.get(self.SCOPE_KEY) if scope is not None else self.fixed
        if caller is None:
            raise ToolError("Not authenticated.")
        return caller


def _done(fn):
    """Run a tool body: a service's refusal becomes the tool's error message, and the
    database connection of the SDK's worker thread is given back afterwards."""
    from functools import wraps

    from django.db import close_old_connections, connection

    @wraps(fn)
    def wrapped(*args, **kwargs):
        close_old_connections()
        try:
            return fn(*args, **kwargs)
        except services.InputError as exc:
            detail = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
            raise ToolError(f"{exc} {detail}".strip()) from None
        except services.ServiceError as exc:
            raise ToolError(str(exc)) from None
        finally:
            if not connection.in_atomic_block:
                connection.close()

    return wrapped


def _outcome(gate: Gate, run: Run) -> dict:
    run.refresh_from_db()
    return {
        "run": run.pk,
        "gate": gate.pk,
        "outcome": gate.status,
        "decidedBy": gate.decider,
        "surface": gate.surface,
        "result": None if gate.is_pending else gate.result,
        "approvals": f"{gate.approvals_given()} of {gate.approvals_needed}",
        "runStatus": run.status_word,
        "url": run_url(run.pk),
    }


def build_server(caller_of: CallerOf) -> MCPServer:
    server = MCPServer("loop-console", version="1", instructions=INSTRUCTIONS, log_level="WARNING")
    _add_reading_tools(server, caller_of)
    _add_inbox_tool(server, caller_of)
    _add_waiting_tool(server, caller_of)
    _add_steering_tools(server, caller_of)
    _add_gate_tools(server, caller_of)
    return server


def _gate_of(run: Run, gate_id: int | None) -> Gate:
    """Gate `gate_id` of the run; without one, the gate it waits at (or, when none waits,
    the last one decided)."""
    gates = run.gates.select_related("iteration", "decided_by")
    if gate_id is not None:
        gate = gates.filter(pk=gate_id).first()
    else:
        gate = gates.filter(status=Gate.Status.PENDING).first() or gates.order_by("-id").first()
    if gate is None:
        raise ToolError(
            f"Run {run.pk} has no gate {gate_id}." if gate_id else f"Run {run.pk} has no gate."
        )
    return gate


def _add_reading_tools(server: MCPServer, caller_of: CallerOf) -> None:
    """The tools that only read: the viewer role is enough."""

    @server.tool()
    @_done
    def list_runs(
        ctx: Context,
        status: Annotated[str | None, Field(description="e.g. paused, running, failed")] = None,
        recipe: Annotated[str | None, Field(description="A recipe's slug")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        cursor: Annotated[
            int | None, Field(ge=1, description="next_cursor of the last page")
        ] = None,
    ) -> dict[str, Any]:
        """Runs, newest first, each with the id of the gate it waits at (if any)."""
        caller = caller_of(ctx)
        caller.may_read()
        runs = caller.runs().order_by("-id")
        if status:
            runs = runs.filter(Run.showing(status))
        if recipe:
            runs = runs.filter(recipe__slug=recipe)
        if cursor:
            runs = runs.filter(id__lt=cursor)
        pending = Gate.objects.filter(status=Gate.Status.PENDING)
        runs = runs.prefetch_related(Prefetch("gates", pending, to_attr="waiting_gates"))
        page, more = take_page(runs, limit)
        return {"runs": [run_row(r) for r in page], "next_cursor": page[-1].pk if more else None}

    @server.tool()
    @_done
    def list_gates(ctx: Context, limit: Annotated[int, Field(ge=1, le=200)] = 50) -> dict[str, Any]:
        """Gates waiting for a decision, oldest first, with their structured state."""
        caller = caller_of(ctx)
        caller.may_read()
        gates = (
            Gate.objects.filter(status=Gate.Status.PENDING, run__in=caller.runs())
            .select_related("iteration")
            .order_by("created_at", "id")[:limit]
        )
        return {"gates": [gate_state(g) for g in gates]}

    @server.tool()
    @_done
    def get_run(ctx: Context, run_id: RunId) -> dict[str, Any]:
        """A run: status, nodes (iterations done and allowed, output), the gate it waits at."""
        caller = caller_of(ctx)
        caller.may_read()
        return run_state(caller.run(run_id))

    @server.tool()
    @_done
    def get_gate(ctx: Context, run_id: RunId, gate_id: GateId = None) -> dict[str, Any]:
        """A gate's structured state: the iteration, completionSignaled, an output excerpt,
        the gate message and what approve would do. Without gate_id, the gate the run
        waits at (or, when none waits, the last one decided)."""
        caller = caller_of(ctx)
        caller.may_read()
        return gate_state(_gate_of(caller.run(run_id), gate_id))


def _add_inbox_tool(server: MCPServer, caller_of: CallerOf) -> None:
    """The inbox's ranking, as the console's inbox and GET /api/inbox give it: a read."""

    @server.tool()
    @_done
    def inbox(ctx: Context) -> dict[str, Any]:
        """What needs attention, most urgent first, each item with its reason: gates with a
        deadline (soonest or most overdue first), then by the run's burn rate (cost per
        minute since it started), then running loops whose plateau stop rule one more flat
        iteration fires, then the rest (longest waiting first). kind: gate,
        needs_person or running; why: deadline, burn_rate, plateau or waiting."""
        caller = caller_of(ctx)
        caller.may_read()
        base = settings.LOOP_BASE_URL.rstrip("/")
        ranked = ranked_attention(user=caller.user)  # None: the command line's, everything
        return {"items": [{**i.as_dict(), "url": base + i.path} for i in ranked]}


def _add_waiting_tool(server: MCPServer, caller_of: CallerOf) -> None:
    """A read that blocks: the viewer role is enough."""

    @server.tool()
    @_done
    def wait_for_run(
        ctx: Context,
        run_id: RunId,
        timeout_seconds: Annotated[
            float,
            Field(
                ge=0,
                le=waiting.MOST_SECONDS,
                description=f"Seconds to wait at most (at most {waiting.MOST_SECONDS})",
            ),
        ] = waiting.DEFAULT_SECONDS,
    ) -> dict[str, Any]:
        """Wait until a run needs a person or ends, instead of polling get_run. state:
        needs_person (a gate waits for a decision, or the run stopped until a person steps
        in), completed, ended (failed or cancelled), or running when timeout_seconds passed
        first (call again to go on waiting); reason says why; run is get_run's answer."""
        caller = caller_of(ctx)
        caller.may_read()
        result = waiting.wait_for_person(caller.run(run_id), timeout_seconds)
        return {"state": result.state, "reason": result.reason, "run": run_state(result.run)}


def _check_decision(gate: Gate, accept: bool, feedback: str, decision: str) -> None:
    """Refuse an approve that decides nothing, or both ways at a loop's gate."""
    if gate.kind == Gate.Kind.LOOP:
        if accept and feedback.strip():
            raise ToolError(
                "Give accept: true to finalize, or feedback to run another iteration; not both."
            )
        if not accept and not feedback.strip():
            raise ToolError(
                "Nothing decided: give accept: true to finalize, or feedback to iterate."
            )
    elif not accept and not decision:
        raise ToolError("Give accept: true (and a decision, if the gate declares them).")


def _add_gate_tools(server: MCPServer, caller_of: CallerOf) -> None:
    """The tools that decide at gates: the operator role."""

    @server.tool()
    @_done
    def approve(
        ctx: Context,
        run_id: RunId,
        accept: Accept = False,
        feedback: Feedback = "",
        gate_id: GateId = None,
        decision: Annotated[str, Field(description="At an approval declaring decisions")] = "",
    ) -> dict[str, Any]:
        """Decide at the gate a run waits at: accept: true finalizes (the node completes with
        the iteration's output); feedback runs another iteration with it. A gate whose
        iteration met no completion condition has nothing to finalize: approving iterates."""
        caller = caller_of(ctx)
        run = caller.run(run_id)  # one it may not see is missing, whatever its role
        actor = caller.actor()
        gate = services.gate_for_decision(run, gate_id)
        _check_decision(gate, accept, feedback, decision)
        gate = services.approve(gate.pk, actor, comment=feedback, decision=decision)
        return _outcome(gate, run)

    @server.tool()
    @_done
    def respond(
        ctx: Context,
        run_id: RunId,
        decision: Annotated[str, Field(description="The id of one of the gate's decisions")],
        text: Annotated[str, Field(description="What and why (some decisions need it)")] = "",
        digest: Annotated[
            str, Field(description="The gate's digest you reviewed (get_run gives it)")
        ] = "",
        gate_id: GateId = None,
    ) -> dict[str, Any]:
        """Answer the gate a run waits at with one of its offered decisions (get_run lists
        them under pending_gate.offered_decisions). An unknown id is refused with the list;
        a digest of content that changed since is refused saying what changed."""
        caller = caller_of(ctx)
        run = caller.run(run_id)  # one it may not see is missing, whatever its role
        actor = caller.actor()
        gate = services.gate_for_decision(run, gate_id)
        gate = services.respond(gate.pk, actor, decision, text=text, digest=digest)
        return _outcome(gate, run)

    @server.tool()
    @_done
    def reject(
        ctx: Context, run_id: RunId, reason: Reason = "", gate_id: GateId = None
    ) -> dict[str, Any]:
        """Reject at the gate a run waits at: the step fails."""
        caller = caller_of(ctx)
        run = caller.run(run_id)  # one it may not see is missing, whatever its role
        actor = caller.actor()
        gate = services.gate_for_decision(run, gate_id)
        gate = services.reject(gate.pk, actor, reason=reason)
        return _outcome(gate, run)


def _add_steering_tools(server: MCPServer, caller_of: CallerOf) -> None:
    """The tools that change a run: the operator role."""

    @server.tool()
    @_done
    def start_run(
        ctx: Context,
        recipe: Annotated[str, Field(description="The recipe's slug")],
        message: Annotated[str, Field(description="What the run is about")] = "",
        inputs: Annotated[dict[str, Any] | None, Field(description="Declared inputs")] = None,
    ) -> dict[str, Any]:
        """Start a run of a recipe."""
        caller = caller_of(ctx)
        found = caller.recipe(recipe)
        actor = caller.actor()
        run = services.start_run(found, actor=actor, message=message, inputs=inputs or {})
        return {"id": run.pk, "status": run.status_word, "url": run_url(run.pk)}

    @server.tool()
    @_done
    def cancel_run(ctx: Context, run_id: RunId, reason: Reason = "") -> dict[str, Any]:
        """Cancel a run: its agents are stopped, its gates closed."""
        caller = caller_of(ctx)
        run = services.cancel_run(caller.run(run_id), caller.actor(), reason=reason)
        return {"run": run.pk, "runStatus": run.status_word, "url": run_url(run.pk)}
