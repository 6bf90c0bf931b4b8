from django.contrib import admin
from django.utils.html import format_html

from runs.models import Gate, Handoff, ReviewRequest, Run


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    """Runs to look up, never to edit: a run's status, event counter and error change only
    through its transitions (a hand-edited `status` or `last_seq` would break the event log
    and the workers' fencing). Deciding, cancelling and resuming happen on the run's page."""

    list_display = ["id", "recipe", "status", "started_by", "created_at", "console_link"]
    list_filter = ["status"]
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
        return obj is None or obj.is_terminal


@admin.register(Gate)
class GateAdmin(admin.ModelAdmin):
    """The audit log of decisions: who decided which gate, when, what, and from where.
    Read-only: a decision is history, changed only through the services."""

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

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ReadOnly(admin.ModelAdmin):
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ReviewRequest)
class ReviewRequestAdmin(ReadOnly):
    """The audit log of merges: who merged which branch into which, when, with what commit."""

    list_display = [
        "merged_at",
        "merged_by_name",
        "status",
        "branch",
        "target_branch",
        "merge_commit",
        "run",
        "created_at",
    ]
    list_filter = ["status", "merged_by"]
    search_fields = ["branch", "target_branch", "merged_by_name", "repository"]
    exclude = ["diff"]


@admin.register(Handoff)
class HandoffAdmin(ReadOnly):
    """Every handoff recorded on a step-machine run, and who (or which agent) recorded it."""

    list_display = [
        "recorded_at",
        "run",
        "role",
        "status",
        "recorded_by_name",
        "surface",
        "consumed_at",
    ]
    list_filter = ["status", "surface"]
    search_fields = ["role", "summary", "recorded_by_name"]


from runs import admin_providers  # noqa: E402, F401
