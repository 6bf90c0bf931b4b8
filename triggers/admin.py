"""Schedules and webhooks in the admin: edited by editors, with what each did lately."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html
from django_celery_beat import models as beat_models

from console.admin_projects import ProjectScopedAdmin
from console.admin_read_only import ReadOnlyAdmin

from . import schedules
from .models import Schedule, ScheduleFiring, Webhook, WebhookDelivery

RECENT = 20  # firings or deliveries shown on a schedule's or webhook's page

# Beat's own tables are this app's to keep in step (triggers.schedules.sync_beat): edited by
# hand, an entry could send any Celery task with any arguments. Schedules are the way in.
for beat_model in (
    beat_models.PeriodicTask,
    beat_models.IntervalSchedule,
    beat_models.CrontabSchedule,
    beat_models.SolarSchedule,
    beat_models.ClockedSchedule,
):
    if admin.site.is_registered(beat_model):
        admin.site.unregister(beat_model)


class LatestInline(admin.TabularInline):
    """The RECENT newest firings or deliveries of the schedule or webhook the page shows,
    read-only (the whole history is under its own admin)."""

    extra = 0
    max_num = 0
    can_delete = False
    parent_field = ""  # the row's foreign key to the page's object
    newest_first = ""

    @admin.display(description="run")
    def run_link(self, row):
        if not row.run_id:
            return "—"
        url = reverse("run_detail", args=[row.run_id])
        return format_html('<a href="{}">run {}</a>', url, row.run_id)

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        match = request.resolver_match
        parent = match.kwargs.get("object_id") if match else None
        if not parent:
            return rows.none()
        mine = rows.filter(**{self.parent_field: parent}).order_by(self.newest_first, "-id")
        return rows.filter(pk__in=list(mine.values_list("pk", flat=True)[:RECENT]))


class FiringInline(LatestInline):
    model = ScheduleFiring
    parent_field, newest_first = "schedule_id", "-at"
    fields = readonly_fields = ["at", "outcome", "note", "run_link"]
    verbose_name_plural = f"Latest firings (the last {RECENT})"


@admin.register(Schedule)
class ScheduleAdmin(ProjectScopedAdmin):
    project_field = "recipe__project"  # a schedule is its recipe's project's
    list_display = ["name", "recipe", "when", "concurrency", "enabled", "last_fired_at", "next"]
    list_filter = ["enabled", "concurrency", "recipe"]
    search_fields = ["name", "recipe__slug"]
    readonly_fields = ["last_fired_at", "next"]
    inlines = [FiringInline]
    fieldsets = [
        (None, {"fields": ["recipe", "name", "enabled"]}),
        ("When", {"fields": ["cron", "every_seconds", "timezone", "last_fired_at", "next"]}),
        ("Each run", {"fields": ["message", "inputs", "budget", "repository", "concurrency"]}),
    ]

    @admin.display(description="next firing")
    def next(self, schedule):
        return schedules.next_firing(schedule) or "—" if schedule.pk else "—"

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


class DeliveryInline(LatestInline):
    model = WebhookDelivery
    parent_field, newest_first = "webhook_id", "-received_at"
    fields = readonly_fields = [
        "received_at",
        "event",
        "delivery_id",
        "status",
        "outcome",
        "note",
        "run_link",
    ]
    verbose_name_plural = f"Latest deliveries (the last {RECENT})"


@admin.register(Webhook)
class WebhookAdmin(ProjectScopedAdmin):
    project_field = "recipe__project"
    list_display = ["name", "recipe", "url", "signature", "enabled", "created_at"]
    list_filter = ["enabled", "signature", "recipe"]
    search_fields = ["name", "recipe__slug"]
    readonly_fields = ["url"]
    inlines = [DeliveryInline]
    fieldsets = [
        (None, {"fields": ["recipe", "name", "enabled", "url", "secret", "signature"]}),
        (
            "Which deliveries",
            {"fields": ["event_header", "delivery_header", "events", "filters", "per_minute"]},
        ),
        ("Each run", {"fields": ["inputs", "message", "repository"]}),
    ]

    @admin.display(description="payload URL")
    def url(self, webhook):
        """The path after the console's own address (the sender needs the whole URL)."""
        return webhook.path if webhook.pk else "given once saved"

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(ScheduleFiring)
class ScheduleFiringAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    project_field = "schedule__recipe__project"
    list_display = ["at", "schedule", "outcome", "note", "run"]
    list_filter = ["outcome", "schedule"]


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    project_field = "webhook__recipe__project"
    list_display = [
        "received_at",
        "webhook",
        "event",
        "delivery_id",
        "status",
        "outcome",
        "note",
        "run",
    ]
    list_filter = ["outcome", "status", "webhook"]
    search_fields = ["delivery_id"]
