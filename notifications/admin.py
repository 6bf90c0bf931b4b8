from django.contrib import admin, messages
from django.db import models, transaction
from django.utils import timezone

from console.admin_read_only import ReadOnlyAdmin
from runs import dispatch

from .models import SEND_TASK, Delivery, Subscription


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ["name", "channel", "target", "recipe", "user", "enabled", "created_at"]
    list_filter = ["channel", "enabled", "recipe"]
    search_fields = ["name", "url", "email", "user__username"]
    # Pick the person by name (a search box over the accounts), not by a raw id.
    autocomplete_fields = ["user"]
    actions = ["send_test"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = [
        (None, {"fields": ["name", "enabled", "channel"]}),
        ("Which runs", {"fields": ["recipe", "user", "only_own_runs"]}),
        (
            "Which events",
            {
                "fields": [
                    "on_gate_waiting",
                    "on_gate_reminder",
                    "on_run_completed",
                    "on_run_failed",
                ]
            },
        ),
        ("Webhook", {"fields": ["url", "secret"]}),
        ("E-mail", {"fields": ["email"]}),
    ]

    @admin.display(description="to")
    def target(self, sub):
        return sub.target or "—"

    @admin.action(description="Send a test notification")
    def send_test(self, request, queryset):
        """A `gate_waiting`-shaped message with no run behind it, recorded like any other."""
        count = 0
        with transaction.atomic():
            for sub in queryset:
                base = request.build_absolute_uri("/")
                delivery = Delivery.objects.create(
                    subscription=sub,
                    event="test",
                    payload={
                        "event": "test",
                        "summary": f"A test notification for '{sub.name}'.",
                        "at": timezone.now().isoformat(),
                        "run": {"id": None, "recipe": "", "status": "", "url": base},
                        "gate": None,
                    },
                    next_attempt_at=timezone.now(),
                )
                dispatch.send_on_commit(SEND_TASK, delivery.pk)
                count += 1
        messages.success(request, f"Sent {count} test notification(s); see Deliveries.")


@admin.register(Delivery)
class DeliveryAdmin(ReadOnlyAdmin):
    """Every notification sent and how it went. Read-only: history, written by the sender."""

    list_display = [
        "created_at",
        "event",
        "subscription",
        "run",
        "status",
        "response_code",
        "attempts",
        "delivered_at",
        "error",
    ]
    list_filter = ["status", "event", "subscription"]
    date_hierarchy = "created_at"
    list_select_related = ["subscription", "run"]
    readonly_fields = [
        "subscription",
        "event",
        "run",
        "gate",
        "payload",
        "status",
        "attempts",
        "response_code",
        "error",
        "created_at",
        "last_attempt_at",
        "next_attempt_at",
        "delivered_at",
    ]
