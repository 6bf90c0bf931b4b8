import logging

from django.db import connection
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.permissions import viewer_required
from runs import inbox as inbox_queries

logger = logging.getLogger(__name__)


@require_GET
def healthz(request):
    """Database and broker reachable: 200, else 503 naming what is down. Anyone may ask,
    so the answer says only "ok" or "down" (and whether steps run sandboxed, "on" or
    "off"); why is in the server's log and, for staff, on every page."""
    checks = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception:  # any failure means "down"
        logger.exception("healthz: the database is unreachable")
        checks["database"] = "down"
    try:
        from console.celery import app

        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        checks["broker"] = "ok"
    except Exception:
        logger.exception("healthz: the broker is unreachable")
        checks["broker"] = "down"
    healthy = all(value == "ok" for value in checks.values())
    # Not a health condition (the console works), but who runs unsandboxed must be told.
    from runs.sandbox.report import unsandboxed

    sandbox = "off" if unsandboxed() else "on"
    return JsonResponse(
        {"status": "ok" if healthy else "down", **checks, "sandbox": sandbox},
        status=200 if healthy else 503,
    )


@require_GET
@viewer_required
def inbox(request):
    """What needs attention, ranked (runs/inbox.py: ranked_attention, the order GET
    /api/inbox and the MCP tool `inbox` give too), each row with its reason; then the runs
    waiting for a person and the running ones with their progress, recent finished ones,
    counts by status: all of the projects the person may see, nothing of any other. The
    `live` part alone is what the page re-fetches when the inbox stream says so."""
    template = (
        "console/_inbox_live.html" if request.GET.get("part") == "live" else "console/inbox.html"
    )
    return render(request, template, inbox_queries.inbox(request.user))


@require_GET
def metrics(request):
    """Prometheus' text format, for a staff account's session or an API token with the
    `metrics` scope (a scraper needs nothing else), of the projects that account (and the
    token's projects) may see. Bounded queries: runs/metrics.py."""
    from console.auth import limit_to_scope
    from console.models import ApiToken, TokenRefused
    from runs import metrics as collected

    user = getattr(request, "user", None)
    header = request.headers.get("Authorization", "")
    if header.lower().startswith("bearer "):
        try:
            token = ApiToken.for_secret(header[7:].strip())
        except TokenRefused as refused:
            return _refuse(401, str(refused))
        if token is None:
            return _refuse(401, "Unknown or revoked API token.")
        if token.scope != ApiToken.Scope.METRICS:
            return _refuse(
                403,
                f"This API token's scope is '{token.scope}'; /metrics needs a token with "
                "scope 'metrics'.",
            )
        user = limit_to_scope(token.user, token)
    elif user is None or not user.is_authenticated:
        return _refuse(401, "Sign in as staff, or send an API token with scope 'metrics'.")
    elif not user.is_staff:
        return _refuse(403, "Only staff accounts (or a 'metrics' API token) may read /metrics.")
    scope = _metrics_scope(user)
    return HttpResponse(collected.render(scope), content_type=collected.CONTENT_TYPE)


def _metrics_scope(user):
    """The projects whose series a scrape shows: where the reader may see runs."""
    from console.projects import in_project, projects_where
    from runs.metrics import Scope

    token = getattr(user, "api_token", None)
    limited = token is not None and token.limited_to_projects
    every = not limited and in_project(user, "runs.view_run", None)
    return Scope.of(projects_where(user, "runs.view_run"), every=every)


def _refuse(status: int, detail: str) -> JsonResponse:
    response = JsonResponse({"detail": detail}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
    return response


# --- error pages, in the console's own layout ----------------------------------------------


def forbidden(request, exception=None):
    """403: say which role is missing and who can grant it, with the navigation around."""
    role = getattr(exception, "role", "")
    return render(request, "403.html", {"missing_role": role}, status=403)


def not_found(request, exception=None):
    return render(request, "404.html", status=404)


def server_error(request):
    """500: the layout without anything that could fail again (no database queries)."""
    try:
        return render(request, "500.html", status=500)
    except Exception:  # noqa: BLE001 - the error page must never fail in turn
        from django.views.defaults import server_error as plain

        return plain(request)
