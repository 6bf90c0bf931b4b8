"""Runs as OpenTelemetry traces, for a team's observability stack.

Off unless an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or
`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); `OTEL_SDK_DISABLED=true` or
`OTEL_TRACES_EXPORTER=none` keep it off. The SDK reads the other standard variables itself
(headers, timeout, compression, certificates, `OTEL_SERVICE_NAME`,
`OTEL_RESOURCE_ATTRIBUTES`, the sampler, the batch processor's delays); the service is
"loop-console" unless they name one.

A run's trace is built when the run ends (`runs.signals.run_ended`, once its transaction
commits), in whichever process ends it, from the rows every worker wrote: a span for the
run, one per node, one per iteration (an agent call, with the GenAI semantic conventions'
attributes) and one per gate (who decided, how, through which surface), each at the times
its row kept. Built afterwards, a trace needs nothing carried between the processes and
hosts a run's iterations ran in, and no line of the kernel's hot path.

Its ids are derived from the run's row (`trace_id`: its id and the instant it was
created), not stored: every process names the same trace for a run, its page shows the id
before the run ends, and two installs sending to one collector do not collide. A run that
ends again (resumed) sends its spans again, under the same ids.

Exporting never holds a run: the spans go to the SDK's batch processor, whose thread sends
them over OTLP/HTTP within the exporter's timeout; a failure is logged and dropped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

log = logging.getLogger(__name__)

ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE = "loop-console"
SCOPE = "loop-console.runs"
# The GenAI conventions' `gen_ai.provider.name` of each provider kind whose model's maker
# is known; other kinds (command, opencode, demo) are named by their kind.
MAKERS = {
    "openai": "openai",
    "codex": "openai",
    "anthropic": "anthropic",
    "claude": "anthropic",
    "gemini": "gcp.gemini",
}
# Kinds that send one chat request per turn; the others run an agent (a CLI's session).
CHAT_KINDS = {"openai", "anthropic"}
# The bound given to the flush that follows a run's spans, where the SDK honours one; the
# exporter's timeout (OTEL_EXPORTER_OTLP_TIMEOUT) bounds each request either way.
FLUSH_MILLIS = 30_000


def enabled() -> bool:
    """Whether runs are exported: an OTLP endpoint is set and the SDK is not disabled."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(os.environ.get(name, "").strip() for name in ENDPOINTS)


def trace_id(run) -> str:
    """The run's trace id, 32 hex digits, as every process and host derives it."""
    return f"{_trace_number(run):032x}"


def trace_of(run) -> str | None:
    """The trace id a page or the API shows: the run's when runs are exported, else None."""
    return trace_id(run) if enabled() else None


def connect() -> None:
    """Export each run when it ends (from `RunsConfig.ready`)."""
    from runs import signals

    signals.run_ended.connect(_run_ended, dispatch_uid="runs.telemetry.run_ended")


def _run_ended(sender, *, run, **_) -> None:
    if enabled():  # read each time: the variables are the process's, set before it starts
        run_id = run.pk
        transaction.on_commit(lambda: export_run(run_id))


def export_run(run_id: int) -> None:
    """Hand the trace of run `run_id` to the exporter, then have it sent without waiting.
    A failure is logged and never reaches the caller: a trace is never worth a run."""
    from runs.models import Run

    try:
        run = Run.objects.select_related("recipe", "recipe_version", "parent").get(pk=run_id)
        provider, tracer, ids = _tracing()
        _RunTrace(run, tracer, ids).emit()
        threading.Thread(target=_flush, args=(provider,), name="trace-flush", daemon=True).start()
    except Exception:  # whatever went wrong, the run has ended as it did
        log.exception("run %s: its trace could not be exported", run_id)


_flushing = threading.Lock()


def _flush(provider) -> None:
    """Send what is queued now rather than at the batch processor's next turn (a worker
    process may be stopped before it comes). One flush at a time: a flush under way sends
    what arrives meanwhile too."""
    if not _flushing.acquire(blocking=False):
        return
    try:
        provider.force_flush(FLUSH_MILLIS)
    finally:
        _flushing.release()


# --- ids ---------------------------------------------------------------------------------


def _number(size: int, *parts) -> int:
    digest = hashlib.sha256(":".join(map(str, (SERVICE, *parts))).encode()).digest()
    return int.from_bytes(digest[:size], "big") or 1  # zero is the invalid id


def _trace_number(run) -> int:
    return _number(16, "run", run.pk, run.created_at.astimezone(UTC).isoformat())


def _span_number(trace: int, *key) -> int:
    return _number(8, f"{trace:032x}", *key)


def _nanoseconds(moment: datetime) -> int:
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


# --- the SDK, made once per process ------------------------------------------------------

_made: dict = {}
_making = threading.Lock()


def _tracing():
    """(tracer provider, tracer, id generator) of this process, made on first use: a
    forked worker process makes its own (the parent's export thread is not its)."""
    with _making:
        if _made.get("pid") != os.getpid():
            _made.update(pid=os.getpid(), parts=_make())
        return _made["parts"]


def _make():
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    ids = _given_ids()
    # Not the global provider: other libraries' spans are not this module's to send.
    provider = TracerProvider(resource=_resource(), id_generator=ids)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider, provider.get_tracer(SCOPE), ids


def _resource():
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    resource = Resource.create()  # OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    return resource


def _given_ids():
    """The SDK's tracer asks its id generator for each new span's id (and a root span's
    trace id): this one answers the ids `_RunTrace.span` derived, per thread."""
    from opentelemetry.sdk.trace.id_generator import IdGenerator

    class GivenIds(IdGenerator):
        def __init__(self):
            self.next = threading.local()

        def generate_trace_id(self) -> int:
            return self.next.trace_id

        def generate_span_id(self) -> int:
            return self.next.span_id

    return GivenIds()


# --- a run's spans -----------------------------------------------------------------------


class _RunTrace:
    """The spans of one ended run, from its rows: run > node > iteration (the agent call)
    and gate; a loop_group's body nodes under the group's iteration they ran in."""

    def __init__(self, run, tracer, ids):
        self.run, self.tracer, self.ids = run, tracer, ids
        self.trace = _trace_number(run)
        self.end = run.finished_at or timezone.now()
        self.spec = _spec_or_none(run)
        self.agents: dict[str, dict] = {}  # the attributes of each provider name's calls

    def emit(self) -> None:
        from runs.models import Gate, Iteration

        own = {"carried_from__isnull": True}  # a fork's copies ran in another run's trace
        iterations = Iteration.objects.filter(run=self.run, started_at__isnull=False, **own)
        by_node: dict[int, list] = {}
        for it in iterations.order_by("id"):
            by_node.setdefault(it.node_run_id, []).append(it)
        gates = list(Gate.objects.filter(run=self.run, **own).select_related("iteration"))
        root = self.span(("run",), f"run {self.run.recipe.slug}", None, *self._run_facts())
        spans = {"run": root}
        for row in sorted(self.run.nodes.filter(**own), key=lambda r: r.node_id.count(".")):
            self._node(row, by_node.get(row.pk, []), gates, spans)

    def _run_facts(self):
        run = self.run
        attributes = {
            "loop.run.id": run.pk,
            "loop.recipe": run.recipe.slug,
            "loop.recipe.version": run.recipe_version.number,
            "loop.run.status": run.status_word,
            "loop.run.started_by": run.starter,
            "loop.run.parent_id": run.parent_id,
        }
        # From its creation: the wait for a worker is part of a run's time.
        return run.created_at, self.end, attributes, run.error if run.status == "failed" else ""

    def _node(self, row, iterations, gates, spans) -> None:
        group, _, _ = row.node_id.rpartition(".")
        parent = (
            spans.get(("iteration", group, row.iteration))
            or spans.get(("node", group))
            or spans["run"]
        )
        times = [t for it in iterations for t in (it.started_at, it.finished_at) if t]
        start = min([t for t in (row.started_at, row.queued_at, *times) if t], default=None)
        if start is None:
            return  # never started: skipped before its turn, or the run ended first
        end = max([t for t in (row.finished_at or self.end, *times) if t])
        attributes = {
            "loop.node.id": row.node_id,
            "loop.node.kind": row.kind,
            "loop.node.status": row.status,
            "loop.node.iterations": row.iteration_count,
            "loop.group.iteration": row.iteration or None,
        }
        error = row.error if row.status == "failed" else ""
        name = f"node {row.node_id}"
        span = self.span(("node", row.pk), name, parent, start, end, attributes, error)
        spans[("node", row.node_id)] = span
        for it in iterations:
            spans[("iteration", row.node_id, it.number)] = self._iteration(row, it, span)
        for gate in gates:
            if gate.node_run_id == row.pk:
                self._gate(gate, span)

    def _iteration(self, row, it, parent):
        attributes = {
            "loop.node.id": it.node_id,
            "loop.iteration.number": it.number,
            "loop.iteration.status": it.status,
            "loop.iteration.attempts": it.attempts,
            "loop.iteration.score": it.score,
        }
        name = f"iteration {it.number}"
        if row.kind != "loop_group":  # a group's iteration runs its body; the rest call an agent
            agent = self._agent(row)
            operation = agent.get("gen_ai.operation.name", "invoke_agent")
            name = f"{operation} {agent.get('gen_ai.request.model') or agent['loop.provider']}"
            attributes.update(agent)
            attributes.update(
                {
                    "gen_ai.usage.input_tokens": it.tokens_in,
                    "gen_ai.usage.output_tokens": it.tokens_out,
                    "gen_ai.usage.cost": float(it.cost_usd) if it.cost_usd is not None else None,
                    "gen_ai.conversation.id": it.session_id or None,
                }
            )
        error = it.error if it.status in ("failed", "timed_out") else ""
        end = it.finished_at or self.end
        return self.span(("iteration", it.pk), name, parent, it.started_at, end, attributes, error)

    def _gate(self, gate, parent) -> None:
        attributes = {
            "loop.node.id": gate.node_id,
            "loop.gate.id": gate.pk,
            "loop.gate.kind": gate.kind,
            "loop.gate.status": gate.status,
            # A declared choice when the gate offers some, else what the decision did.
            "loop.gate.decision": gate.decision or (gate.status if gate.decided_at else None),
            "loop.gate.decided_by": gate.decided_by_name or None,
            "loop.gate.surface": gate.surface or None,
            "loop.iteration.number": gate.iteration.number if gate.iteration else None,
        }
        end = gate.decided_at or self.end
        self.span(
            ("gate", gate.pk), f"gate {gate.node_id}", parent, gate.created_at, end, attributes
        )

    def _agent(self, row) -> dict:
        """The GenAI attributes of a node's calls: its provider's kind and model, as the
        run's recipe and the admin declare them now."""
        name = (row.state or {}).get("provider") or "default"
        key = f"{name}:{row.node_id}"
        if key not in self.agents:
            kind, model = _provider_facts(self.spec, row.node_id, name, self.run.project_id)
            self.agents[key] = {
                "loop.provider": name,
                "gen_ai.operation.name": "chat" if kind in CHAT_KINDS else "invoke_agent",
                "gen_ai.provider.name": MAKERS.get(kind, kind) or None,
                "gen_ai.system": MAKERS.get(kind, kind) or None,
                "gen_ai.request.model": model or None,
            }
        return self.agents[key]

    def span(self, key, name, parent, start, end, attributes, error=""):
        """One span with the ids `key` derives, started and ended at the rows' times."""
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        self.ids.next.trace_id = self.trace
        self.ids.next.span_id = _span_number(self.trace, *key)
        within = trace.set_span_in_context(parent) if parent is not None else context.Context()
        span = self.tracer.start_span(
            name,
            context=within,
            attributes={k: v for k, v in attributes.items() if v is not None},
            links=self._parent_link() if parent is None else (),
            start_time=_nanoseconds(start),
        )
        if error:
            span.set_status(Status(StatusCode.ERROR, error[:1000]))
        span.end(end_time=_nanoseconds(max(start, end)))
        return span

    def _parent_link(self):
        """A child run's trace links to its parent run's span (each run is its own trace)."""
        from opentelemetry.trace import Link, SpanContext, TraceFlags

        parent = self.run.parent
        if parent is None:
            return ()
        trace = _trace_number(parent)
        context = SpanContext(
            trace, _span_number(trace, "run"), is_remote=True, trace_flags=TraceFlags.SAMPLED
        )
        return (Link(context, {"loop.link": "parent run"}),)


def _spec_or_none(run):
    from runs.executor.spec import spec_for

    try:
        return spec_for(run)
    except Exception:  # noqa: BLE001 - a spec that no longer loads costs the model names only
        return None


def _provider_facts(spec, node_id: str, name: str, project_id: int) -> tuple[str, str]:
    """(kind, model) of provider `name` for node `node_id`, resolved as the registry does
    (runs.providers.registry): the recipe's own `providers:`, the admin's rows, the builtin
    names; the model the node's, else the recipe's, else the provider's."""
    from runs.executor.spec import node_spec
    from runs.models import ProviderConfig

    try:
        node = node_spec(spec, node_id) if spec is not None else None
    except (LookupError, AttributeError, TypeError, ValueError):  # not a workflow's node
        node = None
    declared = (getattr(spec, "providers", None) or {}).get(name)
    if name == "default" and declared is None:
        row = ProviderConfig.objects.default_in(project_id)
        name = row.name if row else settings.LOOP_DEFAULT_PROVIDER or name
    if declared is not None:
        kind, model = declared.kind, declared.model
    elif row := ProviderConfig.objects.usable_in(project_id).filter(name=name).first():
        kind, model = row.kind, row.model
    else:
        kind, model = name, ""  # a builtin name is its kind (demo, claude, codex, ...)
    model = getattr(node, "model", None) or getattr(spec, "model", None) or model
    return kind, model or ""
