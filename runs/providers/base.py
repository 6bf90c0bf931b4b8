"""The provider seam: what every provider implements. Only runs/providers/ knows how an
agent is invoked; the kinds ask its registry for a provider and call it through this.

A provider turns (prompt, session, options) into a stream of output chunks and a result.
Errors are `ProviderError`s that say whether retrying could help.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from runs.agent_tools import ToolBox


class ProviderError(Exception):
    """An agent call failed. `permanent` errors fail fast; transient ones may be retried.
    `status`: the HTTP status the API answered, if it did; `retry_after`: the seconds its
    Retry-After header asked for."""

    def __init__(
        self,
        message: str,
        *,
        permanent: bool = True,
        status: int | None = None,
        retry_after: float | None = None,
    ):
        super().__init__(message)
        self.permanent = permanent
        self.status = status
        self.retry_after = retry_after

    @property
    def busy(self) -> bool:
        """The provider is busy, not broken: rate limited (429), unavailable (503) or
        overloaded (529). Such a call waits (runs/providers/limits.py) rather than fails."""
        return self.status in BUSY_STATUSES


BUSY_STATUSES = frozenset({429, 503, 529})


class ProviderBusy(ProviderError):
    """A busy provider's answer, raised where the call goes back to the queue to wait
    (`AgentRequest.queue_when_busy`) rather than waiting in the worker."""

    def __init__(self, provider: str, cause: ProviderError):
        super().__init__(
            str(cause), permanent=False, status=cause.status, retry_after=cause.retry_after
        )
        self.provider = provider


class Cancelled(Exception):
    """The iteration was cancelled (or lost its lease) while the agent was running."""


# How long an agent may stay silent before its session is ended, unless its recipe says
# (`idle_timeout`, in milliseconds, as recipes write it): runs.executor.agent.request_for.
DEFAULT_IDLE_TIMEOUT_MS = 30 * 60 * 1000


@dataclass
class AgentRequest:
    prompt: str
    workdir: str
    session_id: str | None = None  # resume this session (threaded context); None = fresh
    model: str | None = None
    output_schema: dict | None = None  # enforced providers constrain decoding with it
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT_MS / 1000  # seconds of silence, then ended
    env: dict[str, str] = field(default_factory=dict)
    # Where the request comes from: useful to deterministic agents and to logs.
    run_id: int | None = None
    node_id: str = ""
    iteration: int = 0
    # Tools the agent may call (runs.agent_tools): HTTP providers offer them as function
    # tools, CLI agents reach them through `env` (LOOP_TOOL_SOCKET, see agent_tools.serve).
    tools: ToolBox | None = None
    # A step machine's role that must not write (mode review/readonly, isolation readonly):
    # providers that can start read-only do (claude: plan mode, codex: read-only sandbox).
    read_only: bool = False
    # policy.auto_approve: the agent may act without asking (where its CLI can ask).
    auto_approve: bool = False
    # Whether the agent's process may use the network (its model's API needs it), and the
    # resource limits the recipe asked for (runs.sandbox.Limits; None: the administrator's).
    network: bool = True
    limits: object | None = None
    # The caller holds the call's slot under its provider's limits and puts the call back
    # in the queue when the provider is busy (ProviderBusy): a workflow loop's iteration.
    queue_when_busy: bool = False

    def confinement(self, *, read: tuple[str, ...] = (), write: tuple[str, ...] = ()):
        """Where a CLI agent's process runs: its working folder (read-only for a role that
        must not write), the run's home and artifacts, `read` (the CLI's own files) and
        `write` (a configuration folder the administrator shares)."""
        from runs.sandbox import for_run

        return for_run(
            self.run_id,
            self.workdir,
            writable=not self.read_only,
            network=self.network,
            limits=self.limits,
            read=read,
            write=write,
        )


@dataclass
class AgentResult:
    text: str
    session_id: str = ""
    structured: object | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost_usd: Decimal | None = None
    timed_out: bool = False
    # What the call leaves for the executor to keep once it owns the result (providers
    # never write): the conversation to store under `session_id` (HTTP providers), the
    # tools the agent used, each {"tool", "detail", ...} (recorded as `agent_tool`), and
    # what it changed in the run's worktree (runs.worktree, recorded as `worktree_diff`).
    conversation: list[dict] | None = None
    tool_calls: list[dict] = field(default_factory=list)
    worktree_diff: dict | None = None


# Called with each chunk of output as it arrives. Raises Cancelled to stop the agent.
OnChunk = Callable[[str], None]


class Provider(Protocol):
    name: str
    # "enforced": the agent constrains its output to the schema; "best_effort": we append
    # the schema to the prompt and re-ask on invalid payloads.
    structured_output: str

    def run(self, request: AgentRequest, on_chunk: OnChunk) -> AgentResult: ...
