"""How the API knows who is calling: a bearer token, or the browser's session."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from console.models import ApiToken, TokenRefused

SAFE_METHODS = {"GET", "HEAD", "OPTIONS", "TRACE"}

# Why a request is not logged in, as every surface taking a token says it (the API, its
# docs, the live streams, /mcp): it sent no token, or one that does not work. An unknown
# and a revoked token read the same, so the answer tells no one which secrets existed.
NO_TOKEN = "Authentication required: send 'Authorization: Bearer <token>'."
NOT_VALID = "Invalid API token: it is unknown or was revoked."


def unauthenticated_words(headers) -> tuple[str, str]:
    """The 401's detail and its WWW-Authenticate header (RFC 6750: a token sent and refused
    is an `invalid_token`)."""
    if bearer_secret(headers):
        return NOT_VALID, 'Bearer error="invalid_token"'
    return NO_TOKEN, "Bearer"


def limit_to_scope(user, token: ApiToken):
    """Make ``user`` answer permission checks as ``token`` may: its role's permissions
    narrowed by the token's scope and, when it names some, to the token's projects. Every
    check (the API's, the services') goes through ``has_perm``, so this is the one place a
    scope is enforced (lists narrow through `console.projects.projects_where`, which reads
    the token's projects itself)."""
    role_has_perm, role_ahas_perm = user.has_perm, user.ahas_perm
    _ = token.project_ids  # read now, where the database may be asked (not in an async check)

    def has_perm(perm, obj=None):
        return (
            token.allows(perm)
            and role_has_perm(perm, obj)
            and within_token_projects(user, token, perm, obj)
        )

    async def ahas_perm(perm, obj=None):
        if not (token.allows(perm) and await role_ahas_perm(perm, obj)):
            return False
        return await sync_to_async(within_token_projects)(user, token, perm, obj)

    user.has_perm, user.ahas_perm = has_perm, ahas_perm
    user.api_token = token
    return user


def within_token_projects(user, token: ApiToken, perm: str, obj=None) -> bool:
    """A token limited to projects holds `perm` on an object of one of them (an object of
    no project, a shared provider say, is its role's to answer), and without an object
    when one of them grants it. Asked beside the role's own answer, since a superuser's
    `has_perm` says yes without asking any backend."""
    if not token.limited_to_projects:
        return True
    from console.projects import project_of, projects_where

    if obj is None:
        return projects_where(user, perm).exists()
    project = project_of(obj)
    return project is None or project.pk in token.project_ids


def bearer_secret(headers) -> str | None:
    """The secret of an `Authorization: Bearer <secret>` header, or None without one."""
    header = headers.get("Authorization") or headers.get("authorization") or ""
    scheme, _, secret = header.partition(" ")
    return secret.strip() if scheme.lower() == "bearer" else None


def token_user(secret: str):
    """The user a token acts as, narrowed to its scope; None for an unknown or revoked
    token; TokenRefused (its message says when) for an expired one. For the views outside
    the ninja API that take a token too: the live streams and the MCP endpoint."""
    found = ApiToken.for_secret(secret)
    return None if found is None else limit_to_scope(found.user, found)


def accepts_api_token(view):
    """Mark a page-side view that authenticates a bearer token itself (a live stream): the
    login redirect lets a request carrying `Authorization: Bearer` through to it."""
    view.accepts_api_token = True
    return view


class TokenAuth(HttpBearer):
    """`Authorization: Bearer <token>`; a revoked or unknown token is simply not a login,
    an expired one is refused with a 401 saying so."""

    def authenticate(self, request: HttpRequest, token: str):
        try:
            found = ApiToken.for_secret(token)
        except TokenRefused as refused:
            raise HttpError(401, str(refused)) from None
        if found is None:
            return None
        user = limit_to_scope(found.user, found)
        # Services and permission checks read request.user like every other surface.
        request.user = user
        return user


class SessionAuth(APIKeyCookie):
    """The console's own session, with Django's CSRF check on unsafe methods.

    Unlike ninja's `django_auth` the CSRF check only runs for a logged-in session, so a
    request with no credentials at all answers 401 rather than a misleading 403.
    """

    param_name = settings.SESSION_COOKIE_NAME

    def _get_key(self, request: HttpRequest):
        return None

    def authenticate(self, request: HttpRequest, key):
        user = getattr(request, "user", None)
        if user is None or not user.is_authenticated:
            return None
        if request.method not in SAFE_METHODS and check_csrf(request) is not None:
            raise HttpError(403, "CSRF check failed: send the X-CSRFToken header.")
        return user


def api_auth() -> list:
    return [TokenAuth(), SessionAuth()]


def docs_login_required(view):
    """The schema and the interactive docs describe the API: only for people who may use
    it. A browser is sent to the login page; a script gets 401."""
    from functools import wraps

    from django.contrib.auth.views import redirect_to_login
    from django.http import JsonResponse

    @wraps(view)
    def wrapper(request, *args, **kwargs):
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            try:
                TokenAuth().authenticate(request, header[7:].strip())
            except HttpError as refused:
                return JsonResponse({"detail": refused.message}, status=refused.status_code)
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            if not user.has_perm("runs.view_run"):
                return JsonResponse({"detail": "You need a role to read the API."}, status=403)
            return view(request, *args, **kwargs)
        if "text/html" in request.headers.get("Accept", ""):
            return redirect_to_login(request.get_full_path())
        detail, challenge = unauthenticated_words(request.headers)
        response = JsonResponse({"detail": detail}, status=401)
        response["WWW-Authenticate"] = challenge
        return response

    return wrapper
