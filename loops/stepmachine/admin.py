"""The step machine's tables in the admin: read-only audit logs (handoffs and merges change
only through `handoffs.record_handoff` and `review.merge`)."""

from django.contrib import admin

from console.admin_projects import ProjectScopedAdmin
from console.admin_read_only import ReadOnlyAdmin
from loops.stepmachine.models import Handoff, ReviewRequest


@admin.register(ReviewRequest)
class ReviewRequestAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    """The audit log of merges: who merged which branch into which, when, with what commit."""

    project_field = "run__project"

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
class HandoffAdmin(ProjectScopedAdmin, ReadOnlyAdmin):
    """Every handoff recorded on a step-machine run, and who (or which agent) recorded it."""

    project_field = "run__project"

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
