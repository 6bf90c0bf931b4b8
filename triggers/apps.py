from django.apps import AppConfig


class TriggersConfig(AppConfig):
    name = "triggers"
    verbose_name = "Schedules and webhooks"

    def ready(self):
        """Plug into the kernel, which imports nothing of this app: a run's end may start
        a queued firing (runs.signals), the sweep re-sends a lost one (runs.kinds); a
        schedule keeps its beat entry in step; beat stamps when it sent a firing."""
        from celery.signals import before_task_publish
        from django.db.models.signals import post_delete, post_save

        from runs import kinds, signals

        from . import schedules, tasks  # noqa: F401 - tasks registered with Celery
        from .models import Schedule

        signals.run_ended.connect(schedules.run_ended, dispatch_uid="triggers.run_ended")
        kinds.add_sweep_pass(schedules.queued_firings)
        post_save.connect(
            lambda instance, raw=False, **_: raw or schedules.sync_beat(instance),
            sender=Schedule,
            weak=False,
            dispatch_uid="triggers.sync_beat",
        )
        post_delete.connect(
            lambda instance, **_: schedules.forget_beat(instance),
            sender=Schedule,
            weak=False,
            dispatch_uid="triggers.forget_beat",
        )
        before_task_publish.connect(
            schedules.stamp_sent_at, weak=False, dispatch_uid="triggers.stamp_sent_at"
        )
