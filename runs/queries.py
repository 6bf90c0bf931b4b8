"""Read-side queries for pages (bounded, index-friendly)."""

from runs.models import Gate, Run


def inbox(user) -> dict:
    gates = (
        Gate.objects.filter(status=Gate.Status.PENDING)
        .select_related("run__recipe", "iteration")
        .order_by("created_at")[:50]
    )
    recent = Run.objects.select_related("recipe").order_by("-id")[:20]
    return {"gates": gates, "recent": recent}
