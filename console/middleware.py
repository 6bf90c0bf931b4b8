"""Login everywhere, a Content-Security-Policy that allows only our own scripts, and pages
that the browser does not keep (they show live state)."""

from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.urls import Resolver404, resolve

from console.auth import bearer_secret

# Paths that must answer without a session: the login page itself, the health probe,
# static files and the icon, the API and /metrics (which authenticate bearer tokens
# themselves and answer 401), and inbound webhooks (a delivery proves itself by its
# signature, triggers.webhooks).
PUBLIC_PREFIXES = (
    "/accounts/login/",
    "/healthz",
    "/static/",
    "/api/",
    "/metrics",
    "/favicon.ico",
    "/hooks/",
    "/slack/interactions/",  # Slack's signature proves it (notifications.slack)
    "/decide/",  # a signed decision link names its one person (notifications.links)
    # Sign-in with the identity provider starts without a session; its answer proves itself
    # by the state, nonce and PKCE verifier this browser's session holds (console.oidc).
    "/oidc/authenticate/",
    "/oidc/callback/",
)


class LoginRequiredMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (
            not request.user.is_authenticated
            and not request.path.startswith(PUBLIC_PREFIXES)
            and not _token_for_a_view_that_takes_one(request)
        ):
            return redirect_to_login(request.get_full_path(), settings.LOGIN_URL)
        return self.get_response(request)


def _token_for_a_view_that_takes_one(request) -> bool:
    """A bearer token sent to a view that checks tokens itself (`accepts_api_token`: the
    live stream): that view answers it, with 401 when the token is bad."""
    if bearer_secret(request.headers) is None:
        return False
    try:
        view = resolve(request.path_info).func
    except Resolver404:
        return False
    return getattr(view, "accepts_api_token", False)


def _form_action() -> str:
    """'self', and the identity provider's origin when sign-in with it is on: logging out
    posts here and goes on to its end-session page, a redirect the browser checks against
    form-action."""
    if not settings.OIDC_ENABLED:
        return "form-action 'self'"
    issuer = urlsplit(settings.LOOP_OIDC_ISSUER)
    return f"form-action 'self' {issuer.scheme}://{issuer.netloc}"


CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "frame-ancestors 'none'",
        "base-uri 'self'",
        _form_action(),
        "object-src 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if request.path.startswith("/api/docs"):
            # The interactive API docs load their own bundled assets inline.
            return response
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response


class PagesAreNotStoredMiddleware:
    """A page shows live state (gates waiting, a run's status): Back must not bring a stale
    copy out of the browser's cache. HTML answers are `no-store` unless a view said
    otherwise; static files and JSON keep their own caching. (A page the back/forward cache
    restores reloads itself: static/js/console-page.js.)"""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            response.headers.setdefault("Cache-Control", "no-store")
        return response
