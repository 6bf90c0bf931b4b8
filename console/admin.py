from django import forms
from django.contrib import admin, messages
from django.utils import timezone

from console.admin_projects import ProjectScopedAdmin
from console.models import (
    DEFAULT_LIFETIME,
    ApiToken,
    Membership,
    OidcRoleMapping,
    Project,
)


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
    # Empty: every project its user may see; else only these (console.projects).
    filter_horizontal = ["projects"]
    actions = ["revoke_tokens"]

    def get_fields(self, request, obj=None):
        if obj is None:
            return ["user", "name", "scope", "projects", "expires_at"]
        return [
            "user",
            "name",
            "scope",
            "projects",
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
        # One by one, through `revoke`: each revocation is an event of the audit log.
        count = sum(token.revoke() for token in queryset.filter(revoked_at__isnull=True))
        self.message_user(request, f"Revoked {count} token(s).", messages.SUCCESS)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    fields = ["user", "role"]
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(ProjectScopedAdmin):
    """A project and its members' roles in it (a global role, a group, holds in every
    project already). Each change of a member's role is an event of the audit log
    (console.audit records every membership saved or deleted)."""

    project_field = "pk"
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


class OidcRoleMappingForm(forms.ModelForm):
    class Meta:
        model = OidcRoleMapping
        fields = ["claim_value", "role", "project"]

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("role") == OidcRoleMapping.ADMINISTRATOR and cleaned.get("project"):
            raise forms.ValidationError(
                {"project": "An administrator is one everywhere: leave the project empty."}
            )
        return cleaned


@admin.register(OidcRoleMapping)
class OidcRoleMappingAdmin(admin.ModelAdmin):
    """What a group (or role) of the identity provider gives at each sign-in (console.oidc).
    Only administrators see or change it: a mapping can make an administrator."""

    form = OidcRoleMappingForm
    list_display = ["claim_value", "role", "project"]
    list_filter = ["role", "project"]
    search_fields = ["claim_value"]

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    has_add_permission = has_change_permission = has_delete_permission = has_view_permission
