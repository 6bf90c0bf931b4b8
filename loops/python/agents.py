"""`Agent`: instructions, a provider of the console, and an optional pydantic output type."""

from __future__ import annotations

import inspect
import re
import time
from decimal import Decimal

from .context import Context, Scope, render_prompt
from .results import AgentFailed, AgentResult, Usage

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,79}$")


def check_name(name: str, what: str) -> str:
    if not isinstance(name, str) or not NAME.match(name):
        raise ValueError(
            f"{what} name {name!r}: use 1-80 letters, digits, '-' or '_' (it names the step "
            "in the console)"
        )
    return name


STRUCTURED_OUTPUT_MODES = ("enforced", "best_effort")


def check_backend(backend, agent_name: str) -> None:
    """Refuse, when the agent is built, a backend object (`provider=obj`, `model=obj`) the
    console could not call: what it calls is runs.providers.base.Provider, and a missing
    piece would otherwise only show at the agent's first call (docs/python.md)."""
    missing = []
    run = getattr(backend, "run", None)
    if not callable(run):
        missing.append(
            "a method run(request, on_chunk) that answers one call: it gets an AgentRequest "
            "(request.prompt, .output_schema, ...), passes output text to on_chunk(text) as "
            "it comes, and returns a runs.providers.base.AgentResult"
        )
    elif inspect.iscoroutinefunction(run):
        missing.append(
            "run must be a plain function, not `async def`: the console calls it in a "
            "worker thread and uses what it returns"
        )
    mode = getattr(backend, "structured_output", None)
    if mode not in STRUCTURED_OUTPUT_MODES:
        found = "it has none" if mode is None else f"it is {mode!r}"
        missing.append(
            "an attribute structured_output, 'enforced' or 'best_effort' ("
            + found
            + "): 'enforced' when run() itself makes the answer fit request.output_schema, "
            "'best_effort' to have the schema added to the prompt and a wrong answer re-asked"
        )
    if missing:
        raise TypeError(
            f"agent {agent_name!r}: its backend {type(backend).__name__} lacks what the console "
            "calls on it (the provider protocol): " + "; ".join(missing)
        )


class Runnable:
    """What agents and workflows share: `await x.run(input)`."""

    name: str

    async def run(self, input="", *, host=None) -> AgentResult:
        """Run on `input` (text, or a previous result). Without a `host`, a process
        configured with the console's settings records the run in the console."""
        from .hosts import default_host

        text = input.text if isinstance(input, AgentResult) else str(input)
        host = host or default_host()
        await host.open(self, text)
        try:
            result = await self._execute(Context(input=text), Scope(host))
        except BaseException as exc:
            await host.close(error=exc)
            raise
        await host.close(result=result)
        return result

    async def _execute(self, context: Context, scope: Scope) -> AgentResult:
        raise TypeError(f"{type(self).__name__} cannot run")

    def agents(self) -> list[Agent]:
        return []


class Agent(Runnable):
    def __init__(
        self,
        name: str,
        instructions: str,
        provider=None,
        output_type=None,
        model: str | None = None,
    ):
        self.name = check_name(name, "agent")
        if not isinstance(instructions, str) or not instructions.strip():
            raise ValueError(f"agent {name!r}: instructions must be non-empty text")
        self.instructions = instructions
        # A provider of the console by name (None: the console's default), or any object
        # with the provider protocol (`run(request, on_chunk)`).
        self.provider = provider
        if output_type is not None and not hasattr(output_type, "model_json_schema"):
            raise TypeError(f"agent {name!r}: output_type must be a pydantic model class")
        self.output_type = output_type
        if provider is None and model is not None and not isinstance(model, str):
            # The design writes `Agent(model=llm)`: an object there is the agent's backend
            # (anything with the provider protocol), not a model name.
            provider, model = model, None
            self.provider = provider
        if provider is not None and not isinstance(provider, str):
            check_backend(provider, name)
        self.model = model

    def __repr__(self) -> str:
        return f"Agent({self.name!r})"

    @property
    def schema(self) -> dict | None:
        return self.output_type.model_json_schema() if self.output_type else None

    @property
    def provider_name(self) -> str:
        if self.provider is None or isinstance(self.provider, str):
            return self.provider or ""
        return getattr(self.provider, "name", type(self.provider).__name__)

    def agents(self) -> list[Agent]:
        return [self]

    async def _execute(self, context: Context, scope: Scope) -> AgentResult:
        node_id = ".".join(scope.path) or self.name
        instructions = scope.host.forked_prompt(node_id, scope.iteration) or self.instructions
        prompt = render_prompt(instructions, context, scope.iteration)
        return await scope.host.call(self, scope, prompt, feedback=context.feedback)

    def parse(self, payload) -> object:
        """Turn a validated payload into the output type; a mismatch fails the agent."""
        if self.output_type is None:
            return payload
        from pydantic import ValidationError

        try:
            return self.output_type.model_validate(payload)
        except ValidationError as exc:
            raise AgentFailed(
                f"agent {self.name!r}: the answer does not fit {self.output_type.__name__}: {exc}"
            ) from None


def call_provider(
    agent: Agent,
    provider,
    prompt: str,
    *,
    iteration: int,
    workdir: str,
    output,
    run=None,
    node_id: str = "",
) -> AgentResult:
    """One blocking agent call, as every kind makes it (runs.executor.agent: request_for,
    run_call): the schema in the prompt or enforced by the provider, re-asked when the
    answer does not fit. `output`: the recording host's OutputStream of the call, so the
    script gets the text the run keeps (LOOP_MAX_OUTPUT_BYTES), the same a replay of this
    call reads back; or, for a script that records nothing, a callback. `run`: the run the
    call is recorded in (its environment is the agent's), None for such a script."""
    from runs.executor.agent import StepFailed, prepare_prompt, request_for, run_call
    from runs.providers.base import ProviderError

    schema = agent.schema
    request = request_for(
        run,
        agent,
        prepare_prompt(prompt, provider, schema),
        node_id=node_id,
        iteration=iteration,
        schema=schema,
        workdir=workdir,
    )
    started = time.monotonic()
    try:
        outcome = run_call(provider, request, output)
    except (StepFailed, ProviderError) as exc:
        raise AgentFailed(f"agent {agent.name!r}: {exc}") from None
    result = outcome.result
    return AgentResult(
        agent=agent.name,
        text=outcome.text,
        output=agent.parse(outcome.payload) if schema else outcome.text,
        structured=outcome.payload,
        usage=Usage(result.tokens_in or 0, result.tokens_out or 0),
        cost=Decimal(result.cost_usd) if result.cost_usd is not None else None,
        iteration=iteration,
        prompt=request.prompt,
        duration_ms=int((time.monotonic() - started) * 1000),
        record=outcome,
    )
