from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self):
        """Plug into the kernel, which imports nothing of this app: listen to its signals
        (runs.signals), the sweep pass that re-sends a
        lost one and the /metrics family (runs.kinds)."""
        from runs import kinds, signals

        from . import events, metrics, tasks

        signals.run_ended.connect(events.run_ended, dispatch_uid="notifications.run_ended")
        signals.gate_opened.connect(events.gate_opened, dispatch_uid="notifications.gate_opened")
        signals.gate_reminded.connect(
            events.gate_reminded, dispatch_uid="notifications.gate_reminded"
        )
        signals.gate_escalated.connect(
            events.gate_escalated, dispatch_uid="notifications.gate_escalated"
        )
        kinds.add_sweep_pass(tasks.lost_notifications)
        kinds.add_metrics(metrics.deliveries)
