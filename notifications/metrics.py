"""What /metrics says about notifications, collected by the kernel's `runs.metrics` once
`NotificationsConfig.ready()` added it (`runs.kinds.add_metrics`)."""

from __future__ import annotations

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from .models import Delivery


def deliveries() -> list:
    counts = dict(Delivery.objects.order_by().values_list("status").annotate(n=Count("id")))
    family = GaugeMetricFamily(
        "loop_notification_deliveries", "Notification deliveries by status.", labels=["status"]
    )
    for status in Delivery.Status.values:
        family.add_metric([status], counts.get(status, 0))
    return [family]
