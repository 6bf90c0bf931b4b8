"""Admin for agent providers. Keys are never stored: only the NAME of the variable."""

from django.contrib import admin, messages

from console.admin_projects import ProjectScopedAdmin
from runs.models import Conversation, ProviderConfig


@admin.register(ProviderConfig)
class ProviderConfigAdmin(ProjectScopedAdmin):
    # A provider of no project is shared: every project's recipes may use it.
    shared = True
    list_display = [
        "name",
        "project",
        "kind",
        "model",
        "target",
        "api_key_env",
        "is_default",
        "enabled",
    ]
    list_filter = ["kind", "enabled", "is_default", "project"]
    search_fields = ["name", "model", "command", "base_url"]
    fieldsets = [
        (None, {"fields": ["name", "project", "kind", "model", "is_default", "enabled"]}),
        ("CLI agents", {"fields": ["command"]}),
        ("HTTP APIs", {"fields": ["base_url", "api_key_env"]}),
        (
            "Limits (shared by every worker; empty: none)",
            {
                "fields": ["max_concurrent", "requests_per_minute", "tokens_per_minute"],
                "description": "Calls beyond them wait in the queue, holding no worker; "
                "configurations with the same API key share them.",
            },
        ),
        ("Extras", {"fields": ["options"]}),
    ]
    actions = ["make_default"]

    def changelist_view(self, request, extra_context=None):
        """The list, under a panel of the limits at work (runs/providers/limits.py)."""
        from runs.providers import limits

        context = dict(extra_context or {})
        try:
            context["limits_figures"] = limits.figures()
        except Exception:  # noqa: BLE001 - the list still shows when Redis does not answer
            context["limits_error"] = "The limits' figures are unavailable: Redis did not answer."
        return super().changelist_view(request, extra_context=context)

    @admin.display(description="command / URL")
    def target(self, obj):
        return obj.command or obj.base_url or "—"

    @admin.action(description="Make the selected provider the default")
    def make_default(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one provider.", messages.ERROR)
            return
        chosen = queryset.get()
        chosen.is_default = True
        chosen.save()
        self.message_user(request, f"{chosen.name} is now the default provider.")


@admin.register(Conversation)
class ConversationAdmin(ProjectScopedAdmin):
    # An agent's message history names no project: only who sees every project reads it.
    project_field = None
    list_display = ["session_id", "provider", "created_at", "updated_at"]
    search_fields = ["session_id", "provider"]
    readonly_fields = ["session_id", "provider", "messages", "created_at", "updated_at"]
