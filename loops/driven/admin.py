"""Loops in the admin: read-only, like the gate log (the pages at /loops read them too)."""

from django.contrib import admin

from console.admin_projects import ProjectScopedAdmin

from .models import Loop, LoopIteration


class ReadOnly:
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class LoopIterationInline(ReadOnly, admin.TabularInline):
    model = LoopIteration
    fields = ["number", "status", "feedback", "attempts", "error", "started_at", "duration_ms"]
    readonly_fields = fields
    extra = 0
    show_change_link = False


@admin.register(Loop)
class LoopAdmin(ReadOnly, ProjectScopedAdmin):
    project_field = "run__project"
    list_display = [
        "id",
        "run",
        "agent",
        "status",
        "iteration_count",
        "max_iterations",
        "started_at",
    ]
    list_filter = ["status"]
    search_fields = ["agent", "=run__id"]
    list_select_related = ["run__recipe"]
    inlines = [LoopIterationInline]
