"""What /metrics says about notifications, collected by the kernel's `runs.metrics` once
`NotificationsConfig.ready()` added it (`runs.kinds.add_metrics`), for the projects the
scrape shows (`runs.metrics.Scope`): a delivery is its run's project's."""

from __future__ import annotations

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from .models import Delivery


def deliveries(scope) -> list:
    rows = scope.narrow(Delivery.objects.order_by(), "run__project")
    counts = {
        (project, status): n
        for project, status, n in rows.values_list("run__project", "status").annotate(n=Count("id"))
    }
    family = GaugeMetricFamily(
        "loop_notification_deliveries",
        "Notification deliveries by project and status.",
        labels=["project", "status"],
    )
    shown = list(scope.slugs.items())
    if any(project is None for project, _ in counts):  # a test message: of no run
        shown.append((None, ""))  # (only who sees every project reads them: scope.narrow)
    for project, slug in shown:
        for status in Delivery.Status.values:
            family.add_metric([slug, status], counts.get((project, status), 0))
    return [family]
