from django.contrib import admin, messages
from django.utils import timezone

from console.models import DEFAULT_LIFETIME, ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "name",
        "user",
        "scope",
        "created_at",
        "expires_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["scope", "revoked_at", "expires_at"]
    search_fields = ["name", "prefix", "user__username"]
    raw_id_fields = ["user"]
    actions = ["revoke_tokens"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "name", "scope", "expires_at"]
        return [
            "user",
            "name",
            "scope",
            "expires_at",
            "prefix",
            "created_at",
            "last_used_at",
            "revoked_at",
        ]

    def get_changeform_initial_data(self, request):
        # A token made by hand lives for a bounded time unless the admin clears the date.
        return {
            **super().get_changeform_initial_data(request),
            "expires_at": timezone.now() + DEFAULT_LIFETIME,
        }

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        # The owner and the secret are fixed at creation; only the label and revocation change.
        return ["user", "prefix", "created_at", "last_used_at"]

    def save_model(self, request, obj, form, change):
        if not change:
            secret = obj.set_new_secret()
            super().save_model(request, obj, form, change)
            messages.warning(
                request,
                f"The token's secret, shown only this once — copy it now: {secret}",
            )
            return
        super().save_model(request, obj, form, change)

    @admin.action(description="Revoke the selected tokens")
    def revoke_tokens(self, request, queryset):
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)
