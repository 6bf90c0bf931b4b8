"""Admin for agent providers. Keys are never stored: only the NAME of the variable."""

from django.contrib import admin, messages

from runs.models import Conversation, ProviderConfig


@admin.register(ProviderConfig)
class ProviderConfigAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "model", "target", "api_key_env", "is_default", "enabled"]
    list_filter = ["kind", "enabled", "is_default"]
    search_fields = ["name", "model", "command", "base_url"]
    fieldsets = [
        (None, {"fields": ["name", "kind", "model", "is_default", "enabled"]}),
        ("CLI agents", {"fields": ["command"]}),
        ("HTTP APIs", {"fields": ["base_url", "api_key_env"]}),
        ("Extras", {"fields": ["options"]}),
    ]
    actions = ["make_default"]

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
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["session_id", "provider", "created_at", "updated_at"]
    search_fields = ["session_id", "provider"]
    readonly_fields = ["session_id", "provider", "messages", "created_at", "updated_at"]
