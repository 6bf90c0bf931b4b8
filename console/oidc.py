"""Sign-in: the login page, and sign-in with the team's identity provider (OpenID Connect).

mozilla-django-oidc runs the authorization code flow, with PKCE and a nonce, and checks the
ID token's signature against the provider's keys (RS256, its JWKS). This module gives it
the provider's endpoints from the discovery document (`discovery`), makes the account from
the claims and sets its roles from the claim mapping at every sign-in (`Backend`,
`apply_mapping`), and turns every refusal into a page that says why (`Callback`).

Off while LOOP_OIDC_ISSUER is empty: the URLs under /oidc/ answer 404 and the login page is
the password form it always was. API tokens are untouched: programs keep theirs.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group
from django.contrib.auth.views import LoginView
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.http import Http404
from django.shortcuts import render, resolve_url
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import (
    OIDCAuthenticationCallbackView,
    OIDCAuthenticationRequestView,
)

from console.audit import acting_as, address_of
from console.forms import LoginForm
from console.models import AuditEvent, Membership, OidcRoleMapping
from console.roles import ROLES

log = logging.getLogger(__name__)

# --- the provider's discovery document ------------------------------------------------------

# The library's endpoint settings, each from its entry of the discovery document.
ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
_discovered: dict = {}
_discovery_lock = threading.Lock()


class ProviderUnreachable(Exception):
    """The discovery document could not be had (the provider is down, or is not the issuer
    LOOP_OIDC_ISSUER names)."""


def discovery() -> dict:
    """The provider's discovery document, fetched once by each process. A failure is not
    kept: the next sign-in asks again."""
    with _discovery_lock:
        if not _discovered:
            _discovered.update(_fetch_discovery(settings.LOOP_OIDC_ISSUER))
        return _discovered


def _fetch_discovery(issuer: str) -> dict:
    url = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        response = httpx.get(url, timeout=settings.OIDC_TIMEOUT, follow_redirects=True)
        response.raise_for_status()
        document = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        raise ProviderUnreachable(
            f"its discovery document ({url}) could not be read: {exc}"
        ) from None
    if not isinstance(document, dict):
        raise ProviderUnreachable(f"its discovery document ({url}) is not a JSON object")
    # OpenID Connect Discovery: the document's issuer is exactly the one asked for.
    if str(document.get("issuer", "")).rstrip("/") != issuer.rstrip("/"):
        raise ProviderUnreachable(
            f"its discovery document names the issuer {document.get('issuer')!r}, not {issuer}"
        )
    missing = [key for key in ENDPOINTS.values() if not document.get(key)]
    if missing:
        raise ProviderUnreachable(f"its discovery document gives no {', '.join(missing)}")
    return document


def setting(name: str, *default):
    """A setting of the library: its endpoints from the discovery document, the rest from
    the console's settings (console/settings.py)."""
    if name in ENDPOINTS:
        return discovery()[ENDPOINTS[name]]
    return import_from_settings(name, *default)


# --- the login page --------------------------------------------------------------------------


def sign_in_context(**extra) -> dict:
    return {
        "oidc_name": settings.LOOP_OIDC_NAME if settings.OIDC_ENABLED else "",
        "password_login": settings.LOOP_PASSWORD_LOGIN,
        **extra,
    }


def login(request):
    """The login page: "Sign in with <name>" when OIDC is on, beside the password form
    unless LOOP_PASSWORD_LOGIN is off (then a password sent anyway is refused)."""
    if request.method == "POST" and not settings.LOOP_PASSWORD_LOGIN:
        return sign_in_page(
            request,
            f"Passwords do not sign in to this console: sign in with {settings.LOOP_OIDC_NAME}.",
            status=403,
        )
    view = LoginView.as_view(authentication_form=LoginForm, extra_context=sign_in_context())
    return view(request)


def sign_in_page(request, error: str, status: int):
    """The login page, saying why a sign-in did not happen."""
    context = sign_in_context(form=LoginForm(request), next="", sign_in_error=error)
    return render(request, "registration/login.html", context, status=status)


def provider_logout_url(request) -> str:
    """Where logging out goes (the library's OIDC_OP_LOGOUT_URL_METHOD, asked before the
    session ends): the provider's end-session endpoint for a session it signed in, which
    comes back to the login page; the login page otherwise."""
    local = resolve_url(settings.LOGOUT_REDIRECT_URL)
    id_token = request.session.get("oidc_id_token")
    if not settings.OIDC_ENABLED or not id_token:
        return local
    try:
        end_session = discovery().get("end_session_endpoint")
    except ProviderUnreachable:
        end_session = None
    if not end_session:  # Google has none: the console's session ends, the provider's stays
        return local
    query = urlencode(
        {
            "id_token_hint": id_token,
            "client_id": settings.OIDC_RP_CLIENT_ID,
            "post_logout_redirect_uri": request.build_absolute_uri(local),
        }
    )
    return f"{end_session}{'&' if '?' in end_session else '?'}{query}"


# --- the flow's two views --------------------------------------------------------------------


class Authenticate(OIDCAuthenticationRequestView):
    """Sends the browser to the provider's authorization endpoint (the library's: state,
    nonce and PKCE's code challenge, kept in the session)."""

    get_settings = staticmethod(setting)

    def __init__(self, **kwargs):
        # The library reads the endpoint here; it is read in get(), where a provider that
        # cannot be reached is told on the login page.
        View.__init__(self, **kwargs)

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404("OpenID Connect is off.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except ProviderUnreachable as exc:
            log.warning("OpenID Connect provider unreachable: %s", exc)
            return sign_in_page(request, _unreachable(exc), status=502)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


def _unreachable(exc) -> str:
    other_way = "; or sign in with your password" if settings.LOOP_PASSWORD_LOGIN else ""
    return f"{settings.LOOP_OIDC_NAME} cannot be reached: {exc}. Try again in a moment{other_way}."


class Callback(OIDCAuthenticationCallbackView):
    """The provider's answer. The library refuses a state that is not this session's and
    an ID token whose nonce is not the sign-in's (SuspiciousOperation); every refusal
    lands on the login page saying why, and is recorded (`sign_in_refused`)."""

    get_settings = staticmethod(setting)

    def get(self, request):
        if not settings.OIDC_ENABLED:
            raise Http404("OpenID Connect is off.")
        name = settings.LOOP_OIDC_NAME
        try:
            return super().get(request)
        except SuspiciousOperation as exc:
            message = f"The answer from {name} does not belong to this sign-in ({exc})."
            return self.refuse("did_not_match", message + " Sign in again.", str(exc), 400)
        except Refused as exc:
            return self.refuse("account_refused", str(exc), str(exc), 403)
        except ProviderUnreachable as exc:
            return self.refuse("unreachable", _unreachable(exc), str(exc), 502)
        except requests.RequestException as exc:
            message = f"{name} did not complete the sign-in. Sign in again."
            return self.refuse("provider_error", message, str(exc), 502)

    def login_failure(self):
        error = self.request.GET.get("error", "")
        if error:
            detail = " ".join([error, self.request.GET.get("error_description", "")]).strip()
            message = f"{settings.LOOP_OIDC_NAME} did not sign you in: {detail}."
        else:
            # No sign-in started in this browser, or an account that is deactivated.
            detail = "no sign-in of this session, or an inactive account"
            message = "The sign-in could not be completed. Sign in again."
        return self.refuse("not_signed_in", message, detail, 403)

    def login_success(self):
        AuditEvent.record(
            "sign_in",
            actor=self.user,
            via="oidc",
            address=address_of(self.request),
            subject=f"{self.user.get_username()} signed in",
        )
        return super().login_success()

    def refuse(self, reason: str, message: str, detail: str, status: int):
        log.warning("OpenID Connect sign-in refused (%s): %s", reason, detail)
        AuditEvent.record(
            "sign_in_refused",
            via="oidc",
            address=address_of(self.request),
            subject=f"sign-in with {settings.LOOP_OIDC_NAME} refused ({reason})",
            reason=reason,
            detail=detail[:500],
        )
        return sign_in_page(self.request, message, status)


# --- accounts and their roles ----------------------------------------------------------------


class Refused(Exception):
    """The provider vouched for the person, and the console still refuses the sign-in; the
    message says why, to them."""


class Backend(OIDCAuthenticationBackend):
    """The library's backend, with the account named by `preferred_username` (else the
    e-mail) and its roles set from the claim mapping at each sign-in (`apply_mapping`)."""

    get_settings = staticmethod(setting)

    def __init__(self, *args, **kwargs):
        # Django makes a backend for every permission check and every request's session:
        # the library's settings (the provider's endpoints) are read in authenticate only.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs):
        if request is None or "nonce" not in kwargs:  # only the callback passes the nonce
            return None
        super().__init__()
        return super().authenticate(request, **kwargs)

    def get_user(self, user_id):
        # Django's, which ends the session of a deactivated account (the library's does not).
        return ModelBackend.get_user(self, user_id)

    def verify_token(self, token, **kwargs):
        """The library checks the signature, the expiry and the nonce; the issuer and the
        audience of the ID token are checked here."""
        payload = super().verify_token(token, **kwargs)
        if "nonce" in kwargs:
            audience = payload.get("aud")
            audiences = audience if isinstance(audience, list) else [audience]
            if payload.get("iss") != discovery()["issuer"]:
                raise SuspiciousOperation("the ID token's issuer is another provider's")
            if settings.OIDC_RP_CLIENT_ID not in audiences:
                raise SuspiciousOperation("the ID token was issued to another client")
        return payload

    def get_userinfo(self, access_token, id_token, payload):
        # The ID token's claims count too: Entra ID sends its groups there only.
        info = super().get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the user info is another person's than the ID token's")
        return {**payload, **info}

    def verify_claims(self, claims):
        if not account_name(claims):
            raise Refused(
                f"{settings.LOOP_OIDC_NAME} sent neither preferred_username nor a verified "
                "e-mail address: the console cannot name the account."
            )
        return True

    def filter_users_by_claims(self, claims):
        return self.UserModel.objects.filter(username=account_name(claims))

    def create_user(self, claims):
        user = self.UserModel.objects.create_user(account_name(claims))  # no password
        return self.update_user(user, claims)

    def update_user(self, user, claims):
        if user.has_usable_password():
            raise Refused(
                f"An account named {user.get_username()} signs in with a password here. An "
                "administrator can turn its password off (the admin, Users, its password: "
                "disabled) to let it sign in with "
                f"{settings.LOOP_OIDC_NAME}."
            )
        user.email = claims.get("email") or user.email
        user.first_name = str(claims.get("given_name") or user.first_name)[:150]
        user.last_name = str(claims.get("family_name") or user.last_name)[:150]
        user.save(update_fields=["email", "first_name", "last_name"])
        apply_mapping(user, grants_for(claim_values(claims)))
        return user


def account_name(claims: dict) -> str:
    """The account's username: `preferred_username`, else a verified e-mail address."""
    name = str(claims.get("preferred_username") or "").strip()
    if not name and claims.get("email_verified") is not False:
        name = str(claims.get("email") or "").strip()
    return name[:150]


def claim_values(claims: dict) -> list[str]:
    """The values of the claims LOOP_OIDC_GROUPS_CLAIM names (a comma-separated list: each
    a claim's name, else a dotted path into the claims, Keycloak's `realm_access.roles`);
    a claim of one string counts as one value (Google's `hd`, an e-mail address)."""
    values = []
    for name in settings.LOOP_OIDC_GROUPS_CLAIM.split(","):
        values += _values_of(claims, name.strip())
    return values


def _values_of(claims: dict, name: str) -> list[str]:
    value = claims.get(name)
    if value is None and "." in name:
        value = claims
        for part in name.split("."):
            value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [str(item) for item in value if isinstance(item, (str, int))]
    return []


# Roles from the weakest to the strongest: one person given two roles in a project by two
# of their groups holds the stronger.
ROLE_RANK = {role: rank for rank, role in enumerate(ROLES)}
# Who the audit log says made the changes a sign-in makes (console.audit records them).
MAPPING = "claim mapping"


@dataclass
class Grants:
    """What the mapping gives for a person's claim values."""

    administrator: bool = False
    global_roles: set[str] = field(default_factory=set)
    project_roles: dict[int, str] = field(default_factory=dict)


def grants_for(values: list[str]) -> Grants:
    grants = Grants()
    for mapping in OidcRoleMapping.objects.filter(claim_value__in=values):
        if mapping.role == OidcRoleMapping.ADMINISTRATOR:
            # Administrators are superusers: a global role, never one project's.
            grants.administrator = grants.administrator or mapping.project_id is None
        elif mapping.project_id is None:
            grants.global_roles.add(mapping.role)
        else:
            held = grants.project_roles.get(mapping.project_id)
            if held is None or ROLE_RANK[mapping.role] > ROLE_RANK[held]:
                grants.project_roles[mapping.project_id] = mapping.role
    return grants


def apply_mapping(user, grants: Grants) -> None:
    """Set the account's global roles and memberships to exactly what the mapping gives,
    replacing what the last sign-in gave. Each change is in the audit log (console.audit
    records every role and membership saved), made by the claim mapping."""
    with transaction.atomic(), acting_as(MAPPING, "oidc"):
        _set_global_roles(user, grants)
        _set_memberships(user, grants.project_roles)


def _set_global_roles(user, grants: Grants) -> None:
    # Only what changes, so that the audit log records only that.
    user.groups.remove(*user.groups.filter(name__in=ROLES).exclude(name__in=grants.global_roles))
    user.groups.add(*Group.objects.filter(name__in=grants.global_roles))
    if grants.administrator:
        user.is_superuser = user.is_staff = True
    elif user.is_superuser:
        # No longer an administrator; a staff status given by hand to someone who never
        # was one stays.
        user.is_superuser = user.is_staff = False
    user.save(update_fields=["is_superuser", "is_staff"])


def _set_memberships(user, wanted: dict[int, str]) -> None:
    held = {m.project_id: m for m in Membership.objects.filter(user=user)}
    for project_id, membership in held.items():
        if project_id not in wanted:
            membership.delete()
    for project_id, role in wanted.items():
        membership = held.get(project_id)
        if membership is None:
            Membership.objects.create(project_id=project_id, user=user, role=role)
        elif membership.role != role:
            membership.role = role
            membership.save(update_fields=["role"])
