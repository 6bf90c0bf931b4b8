"""What /metrics reports, in Prometheus' text format (prometheus_client).

Each scrape runs a fixed number of aggregate queries (no rows come back to Python), inside
one transaction with a statement timeout on PostgreSQL, so a scrape can never hold the
database for long whatever the size of the tables. Queue depth comes from the broker,
worker heartbeats from Redis (runs/executor/heartbeat.py).

What a reader sees is its `Scope`: the series of runs, iterations, gates, agent usage and
notifications carry a `project` label (the project's slug) and only the projects the
reader may see are there (`console.projects`: a token limited to projects gets those).
The queue and the workers are the installation's, named by no project, and shown to every
reader; providers' limits, by provider, only for the providers the reader's projects may
use (a shared one, or one of theirs).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import (
    Count,
    DecimalField,
    DurationField,
    ExpressionWrapper,
    F,
    Min,
    Q,
    Sum,
)
from django.db.models.fields.json import KeyTextTransform
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import CollectorRegistry

from runs import kinds
from runs.models import Gate, Iteration, Run

log = logging.getLogger(__name__)

# Gate wait buckets: a minute to a week (people, not machines, close gates).
WAIT_BUCKETS = (60, 300, 900, 3600, 4 * 3600, 12 * 3600, 86400, 3 * 86400, 7 * 86400)
DECIDED = [Gate.Status.ACCEPTED, Gate.Status.ITERATED, Gate.Status.REJECTED, Gate.Status.TIMED_OUT]
STATEMENT_TIMEOUT_MS = 5000
# The classic text format (what generate_latest writes), which every Prometheus reads.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Scope:
    """The projects a scrape shows: their slugs by id; `every`: the reader sees every
    project, and the rows of none (a test notification) too."""

    slugs: dict[int, str]
    every: bool = False

    @classmethod
    def of(cls, projects, every: bool = False) -> Scope:
        return cls(dict(projects.values_list("pk", "slug")), every)

    def narrow(self, rows, field: str = "project"):
        """`rows` of the projects shown (all of them for who sees every project)."""
        return rows if self.every else rows.filter(**{f"{field}__in": list(self.slugs)})


def everything() -> Scope:
    from console.models import Project

    return Scope.of(Project.objects.all(), every=True)


def runs_by_status(scope: Scope):
    """Runs by the status they show (`Run.status_word`: a kind's phase, else the status)."""
    counts: dict[tuple[int, str], int] = {}
    rows = scope.narrow(Run.objects.order_by()).values_list("project", "status", "phase")
    for project, status, phase, n in rows.annotate(n=Count("id")):
        key = (project, phase or status)
        counts[key] = counts.get(key, 0) + n
    family = GaugeMetricFamily("loop_runs", "Runs by status.", labels=["project", "status"])
    for project, slug in scope.slugs.items():
        for word in Run.status_words():
            family.add_metric([slug, word], counts.get((project, word), 0))
    return [family]


def iterations(scope: Scope):
    rows = (
        scope.narrow(Iteration.objects.order_by(), "run__project")
        .values_list("run__project", "status")
        .annotate(n=Count("id"), never_started=Count("id", filter=Q(started_at__isnull=True)))
    )
    started = CounterMetricFamily(
        "loop_iterations_started", "Iterations that started (every loop kind).", labels=["project"]
    )
    finished = CounterMetricFamily(
        "loop_iterations_finished",
        "Iterations that finished, by how.",
        labels=["project", "status"],
    )
    running = GaugeMetricFamily(
        "loop_iterations_running", "Iterations running now.", labels=["project"]
    )
    found = {(project, status): (n, never) for project, status, n, never in rows}
    for project, slug in scope.slugs.items():
        mine = {status: row for (p, status), row in found.items() if p == project}
        started.add_metric([slug], sum(n - never for n, never in mine.values()))
        for status in sorted(Iteration.FINISHED):
            finished.add_metric([slug, status], mine.get(status, (0, 0))[0])
        running.add_metric([slug], mine.get(Iteration.Status.RUNNING, (0, 0))[0])
    return [started, finished, running]


def gates(now, scope: Scope):
    waited = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
    decided = Gate.objects.filter(status__in=DECIDED, decided_at__isnull=False).annotate(w=waited)
    aggregates = {
        f"le_{i}": Count("id", filter=Q(w__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(WAIT_BUCKETS)
    }
    decided_by_project = {
        row["run__project"]: row
        for row in scope.narrow(decided.order_by(), "run__project")
        .values("run__project")
        .annotate(count=Count("id"), total=Sum("w"), **aggregates)
    }
    pending = {
        row["run__project"]: row
        for row in scope.narrow(Gate.objects.order_by(), "run__project")
        .filter(status=Gate.Status.PENDING)
        .values("run__project")
        .annotate(
            n=Count("id"),
            overdue=Count("id", filter=Q(deadline_at__lte=now)),
            oldest=Min("created_at"),
        )
    }
    histogram = HistogramMetricFamily(
        "loop_gate_wait_seconds",
        "How long decided gates waited for their decision.",
        labels=["project"],
    )
    waiting = GaugeMetricFamily(
        "loop_gates_waiting", "Gates waiting for a decision now.", labels=["project"]
    )
    overdue = GaugeMetricFamily(
        "loop_gates_overdue", "Waiting gates past their deadline.", labels=["project"]
    )
    longest = GaugeMetricFamily(
        "loop_gate_oldest_wait_seconds",
        "How long the longest-waiting gate has waited.",
        labels=["project"],
    )
    for project, slug in scope.slugs.items():
        found = decided_by_project.get(project) or {"count": 0, "total": None}
        buckets = [(str(float(b)), found.get(f"le_{i}", 0)) for i, b in enumerate(WAIT_BUCKETS)]
        buckets.append(("+Inf", found["count"]))
        total = found["total"].total_seconds() if found["total"] else 0.0
        histogram.add_metric([slug], buckets, total)
        open_now = pending.get(project) or {"n": 0, "overdue": 0, "oldest": None}
        waiting.add_metric([slug], open_now["n"])
        overdue.add_metric([slug], open_now["overdue"])
        oldest = open_now["oldest"]
        longest.add_metric([slug], (now - oldest).total_seconds() if oldest else 0)
    return [histogram, waiting, overdue, longest]


def _money():
    return DecimalField(max_digits=18, decimal_places=6)


def provider_usage(scope: Scope):
    """Tokens and cost per project and provider: every agent call is an iteration (a
    prompt step's too), under the provider its node names."""
    usage: dict[tuple[str, str], list] = {}

    def add(project, provider, tokens_in, tokens_out, cost):
        entry = usage.setdefault((scope.slugs[project], provider or "default"), [0, 0, 0.0])
        entry[0] += int(tokens_in or 0)
        entry[1] += int(tokens_out or 0)
        entry[2] += float(cost or 0)

    per_iteration = (
        scope.narrow(Iteration.objects, "run__project")
        .annotate(provider=KeyTextTransform("provider", "node_run__state"))
        .order_by()
        .values_list("run__project", "provider")
        .annotate(Sum("tokens_in"), Sum("tokens_out"), Sum("cost_usd"))
    )
    for row in per_iteration:
        if row[0] in scope.slugs:
            add(*row)
    tokens = CounterMetricFamily(
        "loop_provider_tokens",
        "Tokens used, per project and provider.",
        labels=["project", "provider", "direction"],
    )
    cost = CounterMetricFamily(
        "loop_provider_cost_usd",
        "Cost in US dollars, per project and provider.",
        labels=["project", "provider"],
    )
    for (project, provider), (tokens_in, tokens_out, dollars) in sorted(usage.items()):
        tokens.add_metric([project, provider, "in"], tokens_in)
        tokens.add_metric([project, provider, "out"], tokens_out)
        cost.add_metric([project, provider], dollars)
    return [tokens, cost]


def queue_depth():
    # The process's Celery app (console.celery), without the kernel importing the project.
    from celery import current_app as app
    from django.conf import settings

    family = GaugeMetricFamily(
        "loop_queue_depth", "Messages waiting in the Celery queue.", labels=["queue"]
    )
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        return [family]
    try:
        with app.connection_for_read() as conn:
            client = conn.default_channel.client
            # kombu keeps prioritised messages under `<queue>\x06\x16<priority>`.
            keys = [queue] + [f"{queue}\x06\x16{p}" for p in (3, 6, 9)]
            family.add_metric([queue], sum(client.llen(key) for key in keys))
    except Exception as exc:  # noqa: BLE001 - the broker down is itself worth a scrape
        log.warning("metrics: queue depth unavailable: %s", exc)
    return [family]


def workers():
    from runs.executor import heartbeat

    last = GaugeMetricFamily(
        "loop_worker_heartbeat_timestamp_seconds",
        "When each worker last said it was alive (Unix time).",
        labels=["worker"],
    )
    alive = GaugeMetricFamily("loop_workers_alive", "Workers heard from recently.")
    sandboxed = GaugeMetricFamily(
        "loop_worker_sandboxed",
        "1 when a worker starts steps and agents in the sandbox, 0 when it runs them "
        "unsandboxed (see docs/security.md).",
        labels=["worker"],
    )
    try:
        beats = heartbeat.read()
        states = heartbeat.sandbox_states()
    except Exception as exc:  # noqa: BLE001
        log.warning("metrics: worker heartbeats unavailable: %s", exc)
        beats, states = {}, {}
    for name, at in sorted(beats.items()):
        last.add_metric([name], at)
    alive.add_metric([], len(heartbeat.alive(beats)))
    for name, state in sorted(states.items()):
        sandboxed.add_metric([name], 1 if state.get("active") else 0)
    return [last, alive, sandboxed]


def provider_limits(scope: Scope):
    """Calls in flight and waiting under each provider's limits, and what waiting cost:
    read from Redis, shared by every worker (runs/providers/limits.py). A reader who does
    not see every project gets the providers its projects may use: shared ones and theirs
    (a limit is the provider's, every project's calls together)."""
    from runs.models import ProviderConfig
    from runs.providers import limits

    families = {
        "in_flight": GaugeMetricFamily(
            "loop_provider_calls_in_flight",
            "Calls holding a slot, per provider.",
            labels=["provider"],
        ),
        "waiting": GaugeMetricFamily(
            "loop_provider_calls_waiting",
            "Calls waiting for a slot or room in a window, per provider.",
            labels=["provider"],
        ),
        "throttled": CounterMetricFamily(
            "loop_provider_throttled",
            "Busy answers (HTTP 429, 503, 529) from each provider.",
            labels=["provider"],
        ),
        "waited_seconds": CounterMetricFamily(
            "loop_provider_wait_seconds",
            "Seconds calls were told to wait for each provider.",
            labels=["provider"],
        ),
    }
    try:
        rows = limits.figures()
    except Exception as exc:  # noqa: BLE001 - Redis down is itself worth a scrape
        log.warning("metrics: provider limits unavailable: %s", exc)
        rows = []
    if not scope.every:
        usable = ProviderConfig.objects.filter(
            Q(project__isnull=True) | Q(project__in=list(scope.slugs))
        )
        names = set(usable.values_list("name", flat=True))
        rows = [row for row in rows if row["provider"] in names]
    for row in rows:
        for name, family in families.items():
            family.add_metric([row["provider"]], row.get(name, 0))
    return list(families.values())


class ConsoleCollector:
    def __init__(self, scope: Scope | None = None):
        self.scope = scope

    def collect(self):
        from django.utils import timezone

        now = timezone.now()
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            scope = self.scope or everything()
            families = [
                *runs_by_status(scope),
                *iterations(scope),
                *gates(now, scope),
                *provider_usage(scope),
            ]
            # Families other apps add (runs.kinds.add_metrics): (scope) -> a list of
            # families, read in this transaction, under the same statement timeout.
            for collect in kinds.metrics():
                families += collect(scope)
        families += queue_depth() + workers() + provider_limits(scope)
        yield from families


def render(scope: Scope | None = None) -> bytes:
    """The scrape, of `scope`'s projects (None: every project)."""
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConsoleCollector(scope))
    return generate_latest(registry)
