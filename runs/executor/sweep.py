"""Re-enqueue work whose worker vanished, and work whose message the broker lost.

A running iteration or step renews its lease every half second while it streams. When a
lease has expired, its worker is gone (killed, machine lost): the work goes back to pending
and is sent again, until its recorded attempt count reaches LOOP_MAX_ATTEMPTS, when it
fails. Pending work that nobody claimed for a while is sent again (claims make duplicates
harmless). A gate holds no lease and no message, so a gate may wait for weeks, unless its
recipe gave it a deadline (`gate_timeout`): then `overdue_gates` reminds, rejects or fails
as `on_timeout` says, acting as "the sweep". Kinds and other apps add passes of their own
(`runs.kinds.sweep_passes`: a workflow's loop_group check and its `workflow:` nodes waiting
for children hold no lease; a step machine between ticks holds none either, and its
`resend_lost_ticks` pass wakes one whose wake-up was lost; notifications re-sends a
delivery whose message was lost). docs/architecture.md ("What wakes each kind") says, per
kind, what wakes it and which pass repairs a lost wake-up.

Each pass is named for what it repairs; every one goes through `take_back`, which locks the
run and acts only if the row is still in the state the pass found it in.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from runs import dispatch, kinds
from runs.actor import DEADLINE, SWEEP
from runs.engine.durations import say_duration
from runs.errors import ServiceError
from runs.models import Gate, Iteration, NodeRun, Run

from .state import lock_run, on_fresh_connection

log = logging.getLogger(__name__)


def sweep(now=None) -> dict:
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.LOOP_STALE_PENDING_SECONDS)
    counts: Counter = Counter()
    passes = (
        lambda: expired_iterations(now, counts),
        lambda: expired_steps(now, counts),
        lambda: lost_messages(stale, now, counts),
        lambda: stalled_runs(stale, counts),
        lambda: overdue_gates(now, counts),
    )
    # ... then the passes loop kinds and other apps registered (runs.kinds: a workflow's
    # lost group checks and waiting parents, a step machine's lost ticks and stale
    # machines, notifications' lost deliveries).
    registered = (
        lambda sweep_pass=sweep_pass: sweep_pass(now, stale, counts)
        for sweep_pass in kinds.sweep_passes()
    )
    for sweep_pass in (*passes, *registered):
        # A dropped connection costs this pass one retry on a new one, not the sweep: every
        # action is conditional on what the pass saw, so one done twice does nothing.
        on_fresh_connection(sweep_pass)
    keys = (
        "requeued",
        "failed",
        "resent",
        "advanced",
        "escalated",
        "reminded",
        "timed_out",
        "stale",
    )
    result = {key: counts[key] for key in keys}
    if any(result.values()):
        log.info("sweep: %s", ", ".join(f"{k} {v}" for k, v in result.items() if v))
    return result


def take_back(row, act) -> None:
    """Lock the row's run and let `act(run)` move the row if it still can (each transition
    is conditional on the status, attempt and lease the pass saw)."""
    with transaction.atomic():
        run = lock_run(row.run_id)
        if run is not None:
            act(run)


# How many times the attempt limit a unit that keeps making progress may be lost in all.
PROGRESS_SPARES_LIMIT = 10


def lost(attempts: int) -> str:
    return f"worker lost {attempts} times (attempt limit {settings.LOOP_MAX_ATTEMPTS})"


def expired_iterations(now, counts: Counter) -> None:
    """Agent iterations whose worker stopped renewing the lease: run again, or fail."""
    for it in Iteration.objects.expired(now).exclude(node_run__kind="loop_group"):

        def act(run, it=it):
            if it.attempts < settings.LOOP_MAX_ATTEMPTS:
                counts["requeued"] += it.requeue(run, now)
                return
            error = lost(it.attempts)
            if it.fail(run, error, expired_before=now):
                if not run.is_terminal:
                    row = NodeRun.objects.get(pk=it.node_run_id)
                    row.fail(run, f"iteration {it.number} failed: {error}")
                counts["failed"] += 1

        take_back(it, act)


def expired_steps(now, counts: Counter) -> None:
    """Steps (bash, prompt, a node's start) whose worker vanished: run again, or fail. The
    attempt limit counts lost progress, not lost workers: a unit that made durable progress
    since its claim (NodeRun.progressed_since_claim) goes again with a fresh count; one lost
    LOOP_MAX_ATTEMPTS times in a row with none fails. Progress spares a unit
    PROGRESS_SPARES_LIMIT times the attempt limit at most: a kind that did run its kept work
    again would otherwise be paid for forever."""
    for row in NodeRun.objects.expired(now):

        def act(run, row=row):
            spent = row.executions_lost >= settings.LOOP_MAX_ATTEMPTS * PROGRESS_SPARES_LIMIT
            progressed = not spent and row.progressed_since_claim(
                kinds.of_run(run).rows_outside_graph
            )
            if not spent and (progressed or row.workers_lost < settings.LOOP_MAX_ATTEMPTS):
                counts["requeued"] += row.requeue(run, now, progressed=progressed)
                return
            error = lost(row.executions_lost if spent else row.workers_lost)
            if row.fail(run, error, attempt=row.attempts, expired_before=now):
                row.end_open_calls(run, error)
                counts["failed"] += 1

        take_back(row, act)


def lost_messages(stale, now, counts: Counter) -> None:
    """Pending work nobody claimed for a while: its message may be lost, send it again."""
    for it in Iteration.objects.stale(stale):
        counts["resent"] += it.resend_if_stale(stale, now)
    for row in NodeRun.objects.filter(status=NodeRun.Status.PENDING, queued_at__lt=stale):
        counts["resent"] += row.resend_if_stale(stale, now)


def stalled_runs(stale, counts: Counter) -> None:
    """A run not updated for a while with nothing running, pending or paused: its
    `advance_run` was lost. A healthy long run always has something in one of those: an
    unfinished node (a loop_group's own row aside: it stays running between its
    iterations), or an iteration pending or running under a lease (a group's completion
    check holds its iteration's lease while it runs)."""
    nodes = NodeRun.objects.filter(run=OuterRef("pk"), status__in=NodeRun.UNFINISHED)
    iterations = Iteration.objects.filter(run=OuterRef("pk")).filter(
        Q(status=Iteration.Status.PENDING)
        | Q(status=Iteration.Status.RUNNING, lease_expires_at__isnull=False)
    )
    for run_id in (
        Run.objects.filter(
            status__in=[Run.Status.PENDING, Run.Status.RUNNING], updated_at__lt=stale
        )
        .exclude(Exists(nodes.exclude(kind="loop_group")))
        .exclude(Exists(iterations))
        .values_list("pk", flat=True)
    ):
        dispatch.send_now("advance_run", run_id)
        counts["advanced"] += 1


def overdue_gates(now, counts: Counter) -> None:
    """Gates whose deadline passed: an escalation (`escalate_to` are told and a second
    deadline starts), then the gate's own declared decision (`timeout_decision`, taken "by
    the deadline"), one reminder (the gate keeps waiting), a reject (the step fails as if a
    person rejected it) or a failed run. Each is claimed by a conditional UPDATE of the
    gate, so two sweepers act once."""
    for gate in Gate.objects.overdue(now).select_related("iteration"):
        if gate.escalate_to and gate.escalated_at is None:

            def escalate(run, gate=gate):
                counts["escalated"] += gate.escalate(run, SWEEP, now)

            take_back(gate, escalate)
            continue
        reason = no_decision(gate, now)
        if gate.timeout_decision:
            counts["timed_out"] += decide_for_the_deadline(gate, reason)
            continue
        if gate.on_timeout == Gate.OnTimeout.REJECT:
            from runs import services

            try:
                services.reject(gate.pk, SWEEP, reason=reason)
            except ServiceError:
                continue  # decided (or the run ended) meanwhile
            counts["timed_out"] += 1
            continue

        def act(run, gate=gate, reason=reason):
            if gate.on_timeout == Gate.OnTimeout.FAIL:
                if not run.is_terminal and gate.time_out(run, SWEEP, now, reason):
                    run.fail(f"the gate at '{gate.node_id}' had {reason}; on_timeout: fail")
                    counts["timed_out"] += 1
            elif gate.remind(run, SWEEP, now):
                counts["reminded"] += 1

        take_back(gate, act)


def no_decision(gate: Gate, now) -> str:
    """Why the deadline acts, as the gate's comment and the run's error say it: the whole
    wait, both deadlines when the gate was escalated."""
    if gate.escalated_at is not None:
        waited = say_duration((gate.timeout_seconds or 0) + (gate.escalate_seconds or 0))
        return f"no decision within {waited} (gate_timeout, then escalate_after)"
    waited = say_duration(gate.timeout_seconds or (now - gate.created_at).total_seconds())
    return f"no decision within {waited} (gate_timeout)"


def decide_for_the_deadline(gate: Gate, reason: str) -> int:
    """Take the gate's `timeout_decision` as "the deadline", through the one verb every
    surface decides with; the recipe's rules made sure it neither completes nor ships."""
    from runs import services

    try:
        services.respond(gate.pk, DEADLINE, gate.timeout_decision, text=reason)
    except ServiceError as exc:
        # Decided (or the run ended) meanwhile; anything else stays in the log each sweep.
        if Gate.objects.filter(pk=gate.pk, status=Gate.Status.PENDING).exists():
            log.warning(
                "gate %s: the deadline could not decide %r: %s", gate.pk, gate.timeout_decision, exc
            )
        return 0
    return 1
