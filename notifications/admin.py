from django import forms
from django.contrib import admin, messages
from django.db import models, transaction
from django.utils import timezone

from console.admin_projects import ProjectScopedAdmin
from console.admin_read_only import ReadOnlyAdmin
from runs import dispatch

from .links import revoke_all_for
from .models import SEND_TASK, DecisionLink, Delivery, SlackUser, Subscription


class SubscriptionForm(forms.ModelForm):
    def clean(self):
        cleaned = super().clean()
        if not (cleaned.get("user") or cleaned.get("project")):
            # Nobody's rights would narrow it: it would hear every project's runs.
            self.add_error("project", "A subscription without a person names its project.")
        return cleaned


@admin.register(Subscription)
class SubscriptionAdmin(ProjectScopedAdmin):
    form = SubscriptionForm
    # Of no project: every project its person may see; only who sees every project sees it.
    list_display = [
        "name",
        "channel",
        "target",
        "project",
        "recipe",
        "user",
        "enabled",
        "created_at",
    ]
    list_filter = ["channel", "enabled", "project", "recipe"]
    search_fields = ["name", "url", "email", "slack_channel", "user__username"]
    # Pick the person by name (a search box over the accounts), not by a raw id.
    autocomplete_fields = ["user"]
    actions = ["send_test"]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = [
        (None, {"fields": ["name", "enabled", "channel"]}),
        ("Which runs", {"fields": ["project", "recipe", "user", "only_own_runs"]}),
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
        ("Slack", {"fields": ["slack_channel"]}),
    ]

    def save_model(self, request, obj, form, change):
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

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
class DeliveryAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    """Every notification sent and how it went. Read-only: history, written by the sender.
    One of no run (a test) is shown only to who sees every project."""

    project_field = "run__project"

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
        "recipient",
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


@admin.register(DecisionLink)
class DecisionLinkAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    """The signed decision links sent in mails: made by the sender, never edited; an admin
    revokes them (a link, or every link of its recipient: a lost phone, someone who left)."""

    project_field = "gate__run__project"

    list_display = ["created_at", "recipient", "gate", "decision", "state", "expires_at"]
    list_filter = ["decision", "used_at", "revoked_at"]
    search_fields = ["recipient__username", "recipient__email", "decision"]
    date_hierarchy = "created_at"
    list_select_related = ["recipient", "gate"]
    readonly_fields = [
        "gate",
        "decision",
        "recipient",
        "digest",
        "delivery",
        "created_at",
        "expires_at",
        "used_at",
        "revoked_at",
    ]
    actions = ["revoke", "revoke_all_of_recipients"]

    @admin.display(description="state")
    def state(self, link):
        if link.used_at:
            return "used"
        if link.revoked_at:
            return "revoked"
        return "expired" if link.expires_at <= timezone.now() else "live"

    def has_revoke_permission(self, request):
        return request.user.has_perm("notifications.change_decisionlink")

    @admin.action(description="Revoke the selected links", permissions=["revoke"])
    def revoke(self, request, queryset):
        count = self.rows_for(request, queryset, "change").revoke()
        messages.success(request, f"Revoked {count} link(s).")

    @admin.action(
        description="Revoke every link of the selected links' recipients", permissions=["revoke"]
    )
    def revoke_all_of_recipients(self, request, queryset):
        people = {link.recipient for link in queryset.select_related("recipient")}
        if request.user.is_superuser:
            count = sum(revoke_all_for(person) for person in people)
        else:  # their links in the projects this account may change, not elsewhere
            mine = self.rows_for(
                request, DecisionLink.objects.filter(recipient__in=people), "change"
            )
            count = mine.revoke()
        names = ", ".join(sorted(person.get_username() for person in people))
        messages.success(request, f"Revoked {count} link(s) of {names}.")


@admin.register(SlackUser)
class SlackUserAdmin(admin.ModelAdmin):
    """Who a Slack user is here, when their Slack e-mail is not their console one (a press
    of a gate's button decides as this account)."""

    list_display = ["slack_user_id", "team_id", "user"]
    search_fields = ["slack_user_id", "team_id", "user__username", "user__email"]
    autocomplete_fields = ["user"]
