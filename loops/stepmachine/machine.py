"""The step machine's memory and its transitions, kept on the run's `steps` node.

The node row's `state` holds where the machine is (current step, round, ticks, the last
error, the last consumed handoff, the status a `loop.status` declared, why it waits); the
row's own status says whether it is working (running), waiting at a `human.wait` gate
(paused), done (completed) or failed. Callers hold the run's lock.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from django.utils import timezone

from loops.stepmachine.spec import MACHINE_KIND, MACHINE_NODE, SESSION_KIND
from runs.budget import HOLD
from runs.models import Iteration, NodeRun, Run

from .spec import TICK_TASK

# On the machine row of a run created without starting (it waits for `loop tick`).
CREATED_ONLY = "created_only"
FINAL_STATUSES = {"completed_unreviewed", "approved", "failed", "cancelled"}
STOPPING_STATUSES = {"blocked", "needs_human"}
PHASE_STATUSES = {"observing", "verifying"}

# The step machine's own words for where its run is (`Run.phase`, its kind's `phases`),
# each with what it means: every surface shows the word as the run's status.
PHASES = {
    "observing": "working: watching before it acts",
    "verifying": "working: checking the result",
    "blocked": "stopped: a limit was reached or an agent is blocked; a person must step in",
    "needs_human": "stopped: an agent asks for a person's decision",
    "completed_unreviewed": "finished; no person has reviewed the result yet",
    "approved": "every check passed; ready for a person to merge",
    "merged": "finished; a person merged its review request",
    "nothing_to_merge": "finished; its branch has no commit the target lacks: nothing to merge",
}
# The kernel's status of a run whose machine ended with one of its final words: finished
# well (its phase says how), stopped until a person steps in (paused), failed, cancelled.
ENDED_AS = {
    "completed_unreviewed": Run.Status.COMPLETED,
    "approved": Run.Status.COMPLETED,
    "blocked": Run.Status.PAUSED,
    "needs_human": Run.Status.PAUSED,
    "failed": Run.Status.FAILED,
    "cancelled": Run.Status.CANCELLED,
}


def waits_for_a_person(run: Run) -> bool:
    """Stopped by its machine (blocked, needs_human) until a person steps in."""
    return run.status == Run.Status.PAUSED and run.phase in STOPPING_STATUSES


@dataclass
class MachineState:
    current: str = ""
    round: int = 1
    ticks: int = 0
    last_error: str = ""
    consumed_seq: int = 0
    consumed_at: str | None = None
    status: str = ""  # what the last loop.status said
    waiting: str = ""  # why the machine is not advancing, in words
    stale: bool = False
    progress_at: str | None = None
    gates_step: str = ""  # a gates.run whose commands are running
    ended_at_step: str = ""
    finishing: str = ""  # past this last step, waiting for the turns it sent to finish
    seen_seq: int = 0  # the run's last event when a tick last stopped (lost_ticks)

    @classmethod
    def of(cls, row: NodeRun) -> MachineState:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in (row.state or {}).items() if k in known})

    def save(self, row: NodeRun) -> None:
        # A budget stop's hold (runs.budget) outlives the machine's own saves until resumed.
        held = (row.state or {}).get(HOLD)
        row.state = asdict(self) | ({HOLD: held} if held else {})
        NodeRun.objects.filter(pk=row.pk).update(state=row.state)

    def progressed(self) -> None:
        self.progress_at = timezone.now().isoformat()
        self.stale = False


def create_machine(run: Run, *, started: bool) -> NodeRun:
    """The run's one node, made with the run: a run created without starting is marked so
    (`CREATED_ONLY`): it waits for `loop tick`, and the sweep's `lost_ticks` leaves it."""
    state = {} if started else {CREATED_ONLY: True}
    return NodeRun.objects.create(run=run, node_id=MACHINE_NODE, kind=MACHINE_KIND, state=state)


def start_asked(row: NodeRun) -> None:
    """`loop tick` on a run created without starting: from now on it is due to start."""
    NodeRun.objects.filter(pk=row.pk).update(state={})


def machine_row(run: Run, *, lock: bool = False) -> NodeRun | None:
    rows = NodeRun.objects.filter(run=run, node_id=MACHINE_NODE, iteration=0, kind=MACHINE_KIND)
    if lock:
        rows = rows.select_for_update()
    return rows.order_by("-generation").first()


def derived_status(run: Run, *, finished: bool) -> tuple[str, str | None, str]:
    """The run's (status, error, phase) as its step machine says it (Run.update_status asks
    here): the kernel's status, and the machine's word in `PHASES` ("" for none)."""
    row = machine_row(run)
    if row is None:
        return (Run.Status.RUNNING if run.status != Run.Status.PENDING else run.status), None, ""
    state = MachineState.of(row)
    if row.status == NodeRun.Status.FAILED:
        return Run.Status.FAILED, row.error, ""
    if row.status == NodeRun.Status.CANCELLED:
        return Run.Status.CANCELLED, row.error or None, ""
    if row.status == NodeRun.Status.PAUSED:
        return Run.Status.PAUSED, None, ""
    if row.status == NodeRun.Status.COMPLETED:
        declared = state.status if state.status in ENDED_AS else "completed_unreviewed"
        # Why it stopped is the run's error only when a person must act on it.
        explained = declared in STOPPING_STATUSES or declared == "cancelled"
        phase = declared if declared in PHASES else ""
        return ENDED_AS[declared], (row.error or None) if explained else None, phase
    if row.status == NodeRun.Status.PENDING and row.queued_at is None:
        return run.status, None, run.phase  # created, not started
    if state.status in PHASE_STATUSES:
        return Run.Status.RUNNING, None, state.status
    return Run.Status.RUNNING, None, ""


def end(run: Run, row: NodeRun, status: str, reason: str = "") -> None:
    """The machine stops for good with `status` (a final or intervention-required one)."""
    state = MachineState.of(row)
    state.status = status
    state.waiting = ""
    state.ended_at_step = state.current
    state.save(row)
    if status == "failed":
        row.fail(run, reason or "the recipe ended the run as failed")
    else:
        # Why it stopped is an error only when a person must act on it (or it was stopped).
        error = reason if status in STOPPING_STATUSES or status == "cancelled" else ""
        row.complete(run, reason or status, status=status, columns={"error": error})
    close_idle_sessions(run, f"the run ended ({status})")
    run.update_status(finished=True)
    if status in ("approved", "completed_unreviewed"):
        from . import review

        review.open_request(run, state)


def steps_ran_out(run: Run, row: NodeRun, state: MachineState, last_step: str) -> None:
    """Past the last step: the machine ends, once the turns still in flight have finished
    (each finishing turn ticks the machine again; `_one_tick` calls here)."""
    state.current, state.finishing = "", last_step
    in_flight = [
        session.node_id
        for session in NodeRun.objects.filter(
            run=run, kind=SESSION_KIND, status=NodeRun.Status.RUNNING
        )
        if busy(session)
    ]
    if in_flight:
        reason = f"the steps ended after {last_step}: waiting for {', '.join(in_flight)}"
        if state.waiting != reason:
            run.append_event("step_waiting", last_step, reason=reason)
        state.waiting = reason
        state.save(row)
        return
    state.current = last_step  # recorded as ended_at_step
    state.finishing = ""
    state.save(row)
    end(run, row, "completed_unreviewed", f"the steps ended after {last_step}")


def close_idle_sessions(run: Run, reason: str) -> None:
    """Sessions without a turn in flight end with the run; a busy one ends after its turn."""
    for session in NodeRun.objects.filter(
        run=run, kind=SESSION_KIND, status=NodeRun.Status.RUNNING
    ):
        if not busy(session):
            session.complete(run, reason, reason=reason)


def busy(session: NodeRun) -> bool:
    return Iteration.objects.filter(
        node_run=session, status__in=[Iteration.Status.PENDING, Iteration.Status.RUNNING]
    ).exists()


def live_session(run: Run, role: str) -> NodeRun | None:
    return (
        NodeRun.objects.filter(run=run, kind=SESSION_KIND, node_id=role, iteration=0)
        .order_by("-generation")
        .filter(status=NodeRun.Status.RUNNING)
        .first()
    )


def latest_session(run: Run, role: str) -> NodeRun | None:
    return (
        NodeRun.objects.filter(run=run, kind=SESSION_KIND, node_id=role, iteration=0)
        .order_by("-generation")
        .first()
    )


def saw_events(run: Run, row: NodeRun) -> None:
    """A tick stops here: everything logged so far has been looked at (the caller holds
    the run's lock, so nothing is logged meanwhile)."""
    state = MachineState.of(row)
    state.seen_seq = Run.objects.filter(pk=run.pk).values_list("last_seq", flat=True).first()
    state.save(row)


def lost_ticks(stale_before) -> list[tuple[str, int]]:
    """The sweep's pass for a lost wake-up: a live machine with nothing in flight (no turn
    pending or running, no gates.run under its lease, no start message queued, no gate
    open) where something was logged after its last tick stopped (a handoff, a turn's
    end, a decision, the run's creation, `loop tick`), long enough ago that the message
    it sent should have arrived. Returns the messages to send: `advance_run` for a machine
    never started, `tick_machine` for one under way. A duplicate is harmless: a tick
    reads the database and does what is due."""
    found = []
    rows = NodeRun.objects.filter(
        kind=MACHINE_KIND,
        status__in=[NodeRun.Status.PENDING, NodeRun.Status.RUNNING],
        lease_expires_at__isnull=True,
        run__status__in=Run.ACTIVE,
    ).exclude(run__status=Run.Status.PAUSED, run__phase__in=STOPPING_STATUSES)
    rows = rows.select_related("run")
    for row in rows:
        run = row.run
        if row.status == NodeRun.Status.PENDING:
            if row.queued_at is not None or (row.state or {}).get(CREATED_ONLY):
                continue  # start_node is lost_messages' to re-send; or it waits for `loop tick`
        elif run.last_seq <= MachineState.of(row).seen_seq:
            continue
        in_flight = Iteration.objects.filter(
            run=run, status__in=[Iteration.Status.PENDING, Iteration.Status.RUNNING]
        )
        if in_flight.exists() or run.gates.filter(status="pending").exists():
            continue  # a turn that ends ticks the machine; a gate waits for a person
        at = run.events.filter(seq=run.last_seq).values_list("created_at", flat=True).first()
        if at is None or at >= stale_before:
            continue
        started = row.status == NodeRun.Status.RUNNING
        found.append((TICK_TASK if started else "advance_run", run.pk))
    return found


def mark_stale(now) -> int:
    """The sweep's pass for `policy.stale_after_ms`: a live machine whose last progress is
    older than that is marked stale (shown on its page, in the inbox, by `loop status`)."""
    from datetime import datetime, timedelta

    from django.db import transaction

    from runs.executor.spec import SpecError, spec_for
    from runs.executor.state import lock_run

    marked = 0
    rows = NodeRun.objects.filter(
        kind=MACHINE_KIND,
        status__in=[NodeRun.Status.RUNNING, NodeRun.Status.PAUSED],
        state__stale=False,
    ).values_list("pk", "run_id")
    for pk, run_id in rows:
        with transaction.atomic():
            run = lock_run(run_id)
            row = NodeRun.objects.select_for_update().filter(pk=pk).first()
            if run is None or row is None or run.is_terminal:
                continue
            try:
                limit = spec_for(run).policy.stale_after_ms
            except SpecError:
                continue
            state = MachineState.of(row)
            if not limit or state.stale or not state.progress_at:
                continue
            since = datetime.fromisoformat(state.progress_at)
            if now - since < timedelta(milliseconds=limit):
                continue
            state.stale = True
            state.save(row)
            run.append_event(
                "run_stale", state.current, since=state.progress_at, stale_after_ms=limit
            )
            marked += 1
    return marked
