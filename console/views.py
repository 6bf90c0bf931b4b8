from django.db import connection
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.permissions import viewer_required
from runs import queries


@require_GET
def healthz(request):
    """Database and broker reachable: 200, else 503 naming what is down."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means "down"
        checks["database"] = f"down: {exc.__class__.__name__}"
    try:
        from console.celery import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception as exc:  # noqa: BLE001
        checks["broker"] = f"down: {exc.__class__.__name__}"
    healthy = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ok" if healthy else "down", **checks}, status=200 if healthy else 503
    )


@require_GET
@viewer_required
def inbox(request):
    """Gates waiting for a decision, running runs, recent finished ones, counts by status.
    The `live` part alone is what the page re-fetches when the inbox stream says so."""
    template = (
        "console/_inbox_live.html" if request.GET.get("part") == "live" else "console/inbox.html"
    )
    return render(request, template, queries.inbox())
