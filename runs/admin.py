from django.contrib import admin
from django.utils.html import format_html

from console.admin_projects import ProjectScopedAdmin
from console.admin_read_only import ReadOnlyAdmin
from runs.models import Gate, Run


@admin.register(Run)
class RunAdmin(ProjectScopedAdmin):
    """Runs to look up, never to edit: a run's status, event counter and error change only
    through its transitions (a hand-edited `status` or `last_seq` would break the event log
    and the workers' fencing). Deciding, cancelling and resuming happen on the run's page."""

    list_display = ["id", "recipe", "status", "phase", "started_by", "created_at", "console_link"]
    list_filter = ["status", "phase"]
    list_select_related = ["recipe", "started_by"]
    search_fields = ["message"]

    @admin.display(description="")
    def console_link(self, run):
        return format_html('<a href="{}">open in the console</a>', run.get_absolute_url())

    def has_add_permission(self, request):
        # A run row made by hand has no nodes and never dispatches: runs start from the
        # recipe's start form (or the API / CLI), which validate inputs and send the work.
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        # Deleting a run that workers may still be acting on would pull rows from under them.
        allowed = super().has_delete_permission(request, obj)
        return allowed and (obj is None or obj.is_terminal)


@admin.register(Gate)
class GateAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    """The audit log of decisions: who decided which gate, when, what, and from where.
    Read-only: a decision is history, changed only through the services."""

    project_field = "run__project"

    list_display = [
        "decided_at",
        "who",
        "surface",
        "status",
        "decision",
        "comment_excerpt",
        "run",
        "node_id",
        "kind",
        "created_at",
    ]
    list_filter = ["status", "kind", "surface", "decided_by"]
    search_fields = ["comment", "node_id", "decided_by__username", "decided_by_name"]
    date_hierarchy = "created_at"
    list_select_related = ["run", "decided_by"]

    @admin.display(description="decided by", ordering="decided_by_name")
    def who(self, gate):
        return gate.decider or "—"

    @admin.display(description="comment")
    def comment_excerpt(self, gate):
        return (gate.comment[:80] + "…") if len(gate.comment) > 80 else gate.comment


from runs import admin_providers  # noqa: E402, F401
