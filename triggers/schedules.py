"""What a schedule does when it fires, and how beat learns of it.

Beat (django-celery-beat's database schedule) sends `FIRE_TASK` with the schedule's id;
`fire` decides what the firing does. A firing sent twice (beat restarted before it had
saved when it last sent) or late (beat was down) is recognised from the schedule's own
record, `Schedule.last_fired_at`, moved by one conditional UPDATE: so a firing starts at
most one run, and after downtime at most one run starts for all the firings missed, its
event log saying how many.
"""

from __future__ import annotations

import json
import logging
import math
import zoneinfo
from datetime import datetime, timedelta

from celery.schedules import crontab
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction
from django.utils import timezone

from runs import services
from runs.actor import Actor
from runs.models import Run

from .models import FIRE_TASK, Schedule, ScheduleFiring

log = logging.getLogger(__name__)

# The header beat's process stamps on each FIRE_TASK message: when beat sent it (a worker
# may take it much later; the firing is beat's, not the worker's).
SENT_HEADER = "loop_fired_at"
# A firing of an interval schedule less than this share of the interval after the last one
# is the same firing sent again.
SAME_FIRING_SHARE = 0.5
# Counting missed cron firings looks back this far at most (a week of minutes).
MISSED_LOOKBACK = timedelta(days=7)
SENT_AGAIN = (
    "the same firing sent again (beat restarted, or a message came twice): not started twice"
)
CRON_FIELDS = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")


def cron_fields(expression: str) -> dict[str, str]:
    parts = expression.split()
    if len(parts) != len(CRON_FIELDS):
        raise ValueError(
            f"a cron expression has five fields (minute hour day-of-month month "
            f"day-of-week); this one has {len(parts)}"
        )
    return dict(zip(CRON_FIELDS, parts, strict=True))


def cron_problem(expression: str) -> str:
    """Why `expression` is not a cron expression beat can use ("" when it is)."""
    try:
        crontab(**cron_fields(expression))
    except (ValueError, TypeError) as exc:
        return f"Not a cron expression: {exc}."
    return ""


def actor(schedule: Schedule) -> Actor:
    """Who a schedule's runs are started by; they start with the rights of who set it up
    (and none once that account is gone): its inputs are theirs."""
    rights = schedule.created_by or AnonymousUser()
    return Actor("schedule", label=f"schedule '{schedule.name}'", acting_for=rights)


# --- Firing --------------------------------------------------------------------------------


def fire(schedule_id: int, sent_at: datetime | None = None) -> ScheduleFiring | None:
    """One firing beat sent at `sent_at`: claimed once, then what the schedule's
    concurrency policy says. None when the schedule is gone or paused, or the firing was
    already handled."""
    sent_at = sent_at or timezone.now()
    schedule = (
        Schedule.objects.select_related("recipe", "created_by").filter(pk=schedule_id).first()
    )
    if schedule is None or not schedule.enabled:
        return None
    slot = firing_slot(schedule, sent_at)
    previous = schedule.last_fired_at
    if slot is None or (previous is not None and slot <= previous):
        return _sent_again(schedule, sent_at)
    as_read = {"last_fired_at": previous} if previous else {"last_fired_at__isnull": True}
    claimed = Schedule.objects.filter(pk=schedule.pk, **as_read)
    # One transaction: a worker lost while starting leaves the firing unclaimed, and a
    # second copy of the message waits on the row, then finds it moved.
    with transaction.atomic():
        if claimed.update(last_fired_at=slot):
            return _apply_policy(schedule, slot, missed_firings(schedule, previous, slot))
    return _sent_again(schedule, sent_at)


def _sent_again(schedule: Schedule, sent_at: datetime) -> ScheduleFiring:
    """A firing already handled, sent again (beat restarted before it saved when it last
    sent, or a message delivered twice): recorded, nothing started."""
    return _record(schedule, sent_at, "skipped", SENT_AGAIN)


def firing_slot(schedule: Schedule, sent_at: datetime) -> datetime | None:
    """The firing `sent_at` is: for a cron schedule the minute it is due at (a minute
    the expression names, at or before `sent_at` and a second's slack); for an interval,
    `sent_at` itself unless it is too close to the last firing to be another one."""
    if schedule.cron:
        return _last_cron_minute(schedule, sent_at + timedelta(seconds=1))
    last = schedule.last_fired_at
    if last is not None and (sent_at - last).total_seconds() < (
        schedule.every_seconds * SAME_FIRING_SHARE
    ):
        return None
    return sent_at


def missed_firings(schedule: Schedule, previous: datetime | None, slot: datetime) -> int:
    """How many firings were due between the last one and this one (beat was down)."""
    if previous is None:
        return 0
    if not schedule.cron:
        due = (slot - previous).total_seconds() / schedule.every_seconds
        return max(0, math.floor(due + 1 - SAME_FIRING_SHARE) - 1)
    names = cron_matcher(schedule)
    count, minute = 0, max(previous, slot - MISSED_LOOKBACK) + timedelta(minutes=1)
    minute = minute.replace(second=0, microsecond=0)
    while minute < slot:
        count += names(minute)
        minute += timedelta(minutes=1)
    return count


def _last_cron_minute(schedule: Schedule, until: datetime) -> datetime | None:
    return _first_named(schedule, until.replace(second=0, microsecond=0), -1)


def _first_named(schedule: Schedule, minute: datetime, step: int) -> datetime | None:
    """The first minute from `minute` on (step 1) or back (step -1) that the schedule's
    cron expression names, within MISSED_LOOKBACK."""
    names = cron_matcher(schedule)
    for _ in range(int(MISSED_LOOKBACK.total_seconds() // 60)):
        if names(minute):
            return minute
        minute += timedelta(minutes=step)
    return None


def cron_matcher(schedule: Schedule):
    """Whether the schedule's cron expression names a minute, read in its time zone, as
    Celery's crontab reads the fields (cron's day-of-week: 0 is Sunday)."""
    spec = crontab(**cron_fields(schedule.cron))
    zone = zoneinfo.ZoneInfo(schedule.timezone)

    def names(minute: datetime) -> bool:
        local = minute.astimezone(zone)
        return (
            local.minute in spec.minute
            and local.hour in spec.hour
            and local.day in spec.day_of_month
            and local.month in spec.month_of_year
            and local.isoweekday() % 7 in spec.day_of_week
        )

    return names


def _apply_policy(schedule: Schedule, at: datetime, missed: int) -> ScheduleFiring:
    going = going_runs(schedule)
    policy = Schedule.Concurrency
    if going and schedule.concurrency == policy.SKIP:
        return _record(
            schedule, at, "skipped", f"run {going[0].pk} of this schedule is still going"
        )
    if going and schedule.concurrency == policy.QUEUE:
        try:
            with transaction.atomic():  # a savepoint: the claim above stays
                return _record(
                    schedule, at, "queued", f"starts when run {going[0].pk} ends", missed=missed
                )
        except IntegrityError:  # one waits already: the policy queues one run
            return _record(schedule, at, "skipped", "a firing is already queued")
    if going:  # cancel the previous
        for run in going:
            try:
                services.cancel_run(run, actor(schedule), reason="the schedule started a new run")
            except services.ServiceError:  # it ended meanwhile
                pass
    return start(schedule, at, missed)


def going_runs(schedule: Schedule) -> list[Run]:
    """The runs this schedule started that have not ended."""
    started = ScheduleFiring.objects.filter(schedule=schedule, run__isnull=False)
    return list(
        Run.objects.filter(pk__in=started.values("run_id"))
        .exclude(status__in=Run.TERMINAL)
        .order_by("pk")
    )


def start(schedule: Schedule, at: datetime, missed: int, firing=None) -> ScheduleFiring:
    """A run of the schedule's recipe, recorded on `firing` (a queued one) or a new one."""
    try:
        run = services.start_run(
            schedule.recipe,
            actor(schedule),
            message=schedule.message,
            inputs=dict(schedule.inputs),
            repository=schedule.repository,
            budget=dict(schedule.budget) or None,
        )
    except services.InputError as exc:
        note = "; ".join(f"{k}: {v}" for k, v in exc.errors.items())
        return _record(schedule, at, "failed", note, firing=firing)
    except services.ServiceError as exc:
        return _record(schedule, at, "failed", str(exc), firing=firing)
    if missed:
        run.append_event(
            "schedule_missed",
            schedule=schedule.name,
            missed=missed,
            since=schedule.last_fired_at.isoformat() if schedule.last_fired_at else "",
        )
    return _record(schedule, at, "started", "", run=run, firing=firing)


def _record(schedule, at, outcome, note, *, run=None, firing=None, missed=0):
    if missed:
        note += f" ({missed} earlier firing(s) missed while beat was down)"
    if firing is None:
        return ScheduleFiring.objects.create(
            schedule=schedule, at=at, outcome=outcome, note=note, run=run
        )
    firing.outcome, firing.note, firing.run = outcome, note, run
    firing.save(update_fields=["outcome", "note", "run"])
    return firing


def start_queued(schedule_id: int) -> ScheduleFiring | None:
    """The schedule's queued firing starts its run once none of the schedule's runs is
    going: the firing's row is locked while the run starts, so it starts once."""
    with transaction.atomic():
        firing = (
            ScheduleFiring.objects.select_for_update(skip_locked=True, of=("self",))
            .select_related("schedule__recipe", "schedule__created_by")
            .filter(schedule_id=schedule_id, outcome=ScheduleFiring.Outcome.QUEUED)
            .first()
        )
        if firing is None or going_runs(firing.schedule):
            return None
        return start(firing.schedule, firing.at, 0, firing=firing)


def run_ended(sender, run, **_) -> None:
    """`runs.signals.run_ended`: a run one of our schedules started ended; a firing queued
    behind it may start (sent after the run's transaction commits)."""
    from runs import dispatch

    from .models import START_QUEUED_TASK

    firing = ScheduleFiring.objects.filter(run=run).only("schedule_id").first()
    if firing is not None:
        dispatch.send_on_commit(START_QUEUED_TASK, firing.schedule_id)


def queued_firings(now, stale, counts) -> None:
    """A sweep pass: a queued firing whose schedule has no run going starts (its run's
    end was announced while no worker could hear it)."""
    from runs import dispatch

    from .models import START_QUEUED_TASK

    waiting = ScheduleFiring.objects.filter(outcome="queued", at__lt=stale)
    for schedule_id in waiting.values_list("schedule_id", flat=True)[:200]:
        dispatch.send_now(START_QUEUED_TASK, schedule_id)
        counts["queued_firings"] += 1


# --- Beat's side ---------------------------------------------------------------------------


def sync_beat(schedule: Schedule) -> None:
    """The beat entry that sends FIRE_TASK for `schedule`, made or changed to match it
    (beat's database scheduler notices the change)."""
    from django_celery_beat.models import CrontabSchedule, IntervalSchedule, PeriodicTask

    task = schedule.periodic_task or PeriodicTask(name=f"loop schedule {schedule.pk}")
    task.task, task.args = FIRE_TASK, json.dumps([schedule.pk])
    task.enabled = schedule.enabled
    task.interval = task.crontab = None
    if schedule.cron:
        fields = {**cron_fields(schedule.cron), "timezone": schedule.timezone}
        task.crontab = CrontabSchedule.objects.filter(
            **fields
        ).first() or CrontabSchedule.objects.create(**fields)
    else:
        fields = {"every": schedule.every_seconds, "period": IntervalSchedule.SECONDS}
        task.interval = IntervalSchedule.objects.filter(
            **fields
        ).first() or IntervalSchedule.objects.create(**fields)
    task.save()
    if schedule.periodic_task_id != task.pk:
        Schedule.objects.filter(pk=schedule.pk).update(periodic_task=task)
        schedule.periodic_task = task


def forget_beat(schedule: Schedule) -> None:
    if schedule.periodic_task_id:
        from django_celery_beat.models import PeriodicTask

        PeriodicTask.objects.filter(pk=schedule.periodic_task_id).delete()


def stamp_sent_at(sender=None, headers=None, **_) -> None:
    """`celery.signals.before_task_publish` in beat's process: when a firing was sent."""
    if sender == FIRE_TASK and headers is not None:
        headers.setdefault(SENT_HEADER, timezone.now().timestamp())


def next_firing(schedule: Schedule, now: datetime | None = None) -> datetime | None:
    """When beat sends the schedule's next firing (None while it is paused)."""
    if not schedule.enabled:
        return None
    now = now or timezone.now()
    if not schedule.cron:
        last = schedule.last_fired_at
        since = last or schedule.created_at
        return max(now, since + timedelta(seconds=schedule.every_seconds))
    return _first_named(schedule, now.replace(second=0, microsecond=0) + timedelta(minutes=1), 1)
