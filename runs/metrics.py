"""What /metrics reports, in Prometheus' text format (prometheus_client).

Each scrape runs a fixed number of aggregate queries (no rows come back to Python), inside
one transaction with a statement timeout on PostgreSQL, so a scrape can never hold the
database for long whatever the size of the tables. Queue depth comes from the broker,
worker heartbeats from Redis (runs/executor/heartbeat.py).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import connection, transaction
from django.db.models import Count, DecimalField, DurationField, ExpressionWrapper, F, Q, Sum
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


def runs_by_status():
    """Runs by the status they show (`Run.status_word`: a kind's phase, else the status)."""
    counts: dict[str, int] = {}
    for status, phase, n in (
        Run.objects.order_by().values_list("status", "phase").annotate(n=Count("id"))
    ):
        counts[phase or status] = counts.get(phase or status, 0) + n
    family = GaugeMetricFamily("loop_runs", "Runs by status.", labels=["status"])
    for word in Run.status_words():
        family.add_metric([word], counts.get(word, 0))
    return [family]


def iterations():
    rows = (
        Iteration.objects.order_by()
        .values_list("status")
        .annotate(n=Count("id"), never_started=Count("id", filter=Q(started_at__isnull=True)))
    )
    started = CounterMetricFamily(
        "loop_iterations_started", "Iterations that started (every loop kind)."
    )
    finished = CounterMetricFamily(
        "loop_iterations_finished", "Iterations that finished, by how.", labels=["status"]
    )
    running = GaugeMetricFamily("loop_iterations_running", "Iterations running now.")
    by_status = {status: (n, never) for status, n, never in rows}
    started.add_metric([], sum(n - never for n, never in by_status.values()))
    for status in sorted(Iteration.FINISHED):
        finished.add_metric([status], by_status.get(status, (0, 0))[0])
    running.add_metric([], by_status.get(Iteration.Status.RUNNING, (0, 0))[0])
    return [started, finished, running]


def gates(now):
    waited = ExpressionWrapper(F("decided_at") - F("created_at"), output_field=DurationField())
    decided = Gate.objects.filter(status__in=DECIDED, decided_at__isnull=False).annotate(w=waited)
    aggregates = {
        f"le_{i}": Count("id", filter=Q(w__lte=timedelta(seconds=bound)))
        for i, bound in enumerate(WAIT_BUCKETS)
    }
    found = decided.aggregate(count=Count("id"), total=Sum("w"), **aggregates)
    buckets = [(str(float(b)), found[f"le_{i}"]) for i, b in enumerate(WAIT_BUCKETS)]
    buckets.append(("+Inf", found["count"]))
    total = found["total"].total_seconds() if found["total"] else 0.0
    histogram = HistogramMetricFamily(
        "loop_gate_wait_seconds",
        "How long decided gates waited for their decision.",
        buckets=buckets,
        sum_value=total,
    )
    pending = Gate.objects.filter(status=Gate.Status.PENDING).aggregate(
        n=Count("id"),
        overdue=Count("id", filter=Q(deadline_at__lte=now)),
    )
    oldest = (
        Gate.objects.filter(status=Gate.Status.PENDING)
        .order_by("created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    waiting = GaugeMetricFamily("loop_gates_waiting", "Gates waiting for a decision now.")
    waiting.add_metric([], pending["n"])
    overdue = GaugeMetricFamily("loop_gates_overdue", "Waiting gates past their deadline.")
    overdue.add_metric([], pending["overdue"])
    longest = GaugeMetricFamily(
        "loop_gate_oldest_wait_seconds", "How long the longest-waiting gate has waited."
    )
    longest.add_metric([], (now - oldest).total_seconds() if oldest else 0)
    return [histogram, waiting, overdue, longest]


def _money():
    return DecimalField(max_digits=18, decimal_places=6)


def provider_usage():
    """Tokens and cost per provider: every agent call is an iteration (a prompt step's
    too), under the provider its node names."""
    usage: dict[str, list] = {}

    def add(provider, tokens_in, tokens_out, cost):
        entry = usage.setdefault(provider or "default", [0, 0, 0.0])
        entry[0] += int(tokens_in or 0)
        entry[1] += int(tokens_out or 0)
        entry[2] += float(cost or 0)

    per_iteration = (
        Iteration.objects.annotate(provider=KeyTextTransform("provider", "node_run__state"))
        .order_by()
        .values_list("provider")
        .annotate(Sum("tokens_in"), Sum("tokens_out"), Sum("cost_usd"))
    )
    for row in per_iteration:
        add(*row)
    tokens = CounterMetricFamily(
        "loop_provider_tokens", "Tokens used, per provider.", labels=["provider", "direction"]
    )
    cost = CounterMetricFamily(
        "loop_provider_cost_usd", "Cost in US dollars, per provider.", labels=["provider"]
    )
    for provider, (tokens_in, tokens_out, dollars) in sorted(usage.items()):
        tokens.add_metric([provider, "in"], tokens_in)
        tokens.add_metric([provider, "out"], tokens_out)
        cost.add_metric([provider], dollars)
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


def provider_limits():
    """Calls in flight and waiting under each provider's limits, and what waiting cost:
    read from Redis, shared by every worker (runs/providers/limits.py)."""
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
    for row in rows:
        for name, family in families.items():
            family.add_metric([row["provider"]], row.get(name, 0))
    return list(families.values())


class ConsoleCollector:
    def collect(self):
        from django.utils import timezone

        now = timezone.now()
        with transaction.atomic():
            if connection.vendor == "postgresql":
                with connection.cursor() as cursor:
                    cursor.execute(f"SET LOCAL statement_timeout = {STATEMENT_TIMEOUT_MS}")
            families = [
                *runs_by_status(),
                *iterations(),
                *gates(now),
                *provider_usage(),
            ]
            # Families other apps add (runs.kinds.add_metrics): () -> a list of families,
            # read in this transaction, under the same statement timeout.
            for collect in kinds.metrics():
                families += collect()
        families += queue_depth() + workers() + provider_limits()
        yield from families


def render() -> bytes:
    from prometheus_client import generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ConsoleCollector())
    return generate_latest(registry)
