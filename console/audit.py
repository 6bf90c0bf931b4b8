"""The audit log: who signed in (and how), role and membership changes, API tokens issued
and revoked, decisions at gates and recipe edits, each one `AuditEvent`
(console/models.py) written where the change is saved. `connect()`, called from
`ConsoleConfig.ready` (console/apps.py), wires the recorders; the page and the export
(console/audit_views.py) read them through `events` and `lines`.

Who acted: the change's own record when it names someone (a recipe version's author, a
gate answer's person); else the person of the request being served (`remember_request`,
a middleware), with the request's address; else, outside any request (a management
command, a worker), the command line.
"""

from __future__ import annotations

import ipaddress
import shlex
import sys
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from functools import wraps
from pathlib import Path

from django.contrib.auth import BACKEND_SESSION_KEY, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.signals import user_logged_in, user_logged_out, user_login_failed
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_save
from django.utils.module_loading import import_string

from console.models import ApiToken, AuditEvent, Membership, Project

Kind = AuditEvent.Kind

_request: ContextVar = ContextVar("audit_request", default=None)
# Who a change with no person behind it is made by (`acting_as`), e.g. a sign-in mapping.
_acting: ContextVar = ContextVar("audit_acting", default=None)


def remember_request(get_response):
    """Middleware: keep the request being served, so a change saved while serving it is
    recorded as its person's, from its address."""

    def middleware(request):
        token = _request.set(request)
        try:
            return get_response(request)
        finally:
            _request.reset(token)

    return middleware


@contextmanager
def acting_as(name: str, via: str):
    """Record the changes made inside as `name`'s, through `via` (a change no signed-in
    person makes: the identity provider's groups applied at a sign-in)."""
    token = _acting.set((name, via))
    try:
        yield
    finally:
        _acting.reset(token)


def command_line() -> str:
    return shlex.join([Path(sys.argv[0]).name, *sys.argv[1:]])[:150] if sys.argv else ""


def address_of(request) -> str | None:
    """The client's address, as the sign-in lock counts it (console.throttle), when it is
    an address; else the connection's peer."""
    from console.throttle import client_address

    for candidate in (client_address(request), request.META.get("REMOTE_ADDR", "")):
        try:
            return str(ipaddress.ip_address(candidate))
        except ValueError:
            continue
    return None


def _surface(request) -> str:
    path = request.path
    if path.startswith("/admin/"):
        return "admin"
    return "api" if path.startswith("/api/") else "console"


def _person(request):
    for user in (getattr(request, "auth", None), getattr(request, "user", None)):
        if user is not None and getattr(user, "is_authenticated", False):
            return user
    return None


def who(person=None, via: str = "", request=None) -> dict:
    """The `actor`, `actor_name`, `via` and `address` of a change being saved now."""
    request = request if request is not None else _request.get()
    acting = _acting.get()
    found = {"actor": person, "actor_name": "", "via": via, "address": None}
    if request is not None:
        found["address"] = address_of(request)
        found["actor"] = person or _person(request)
        found["via"] = via or _surface(request)
        if found["actor"] is None:
            found["actor_name"] = f"{request.method} {request.path}"[:150]
    elif person is None:
        found.update(actor_name=command_line(), via=via or "command line")
    if acting is not None and person is None:
        found.update(actor=None, actor_name=acting[0], via=acting[1])
    return found


def record(kind: str, *, person=None, via: str = "", request=None, **fields):
    return AuditEvent.record(kind, **{**who(person, via, request), **fields})


def _saved_by_code(receiver):
    """A save receiver that ignores rows loaded from a fixture (`loaddata`): nobody
    changed anything."""

    @wraps(receiver)
    def wrapped(sender, instance, raw=False, **kwargs):
        if not raw:
            receiver(sender, instance, **kwargs)

    return wrapped


# --- sign-in ---------------------------------------------------------------------------


def sign_in_method(backend_path: str) -> str:
    """How a session was signed in, by the backend that let it in: "password" for
    Django's username and password check, "oidc" for the identity provider."""
    if not backend_path:
        return "password"
    if "oidc" in backend_path.lower():
        return "oidc"
    try:
        backend = import_string(backend_path)
    except ImportError:
        return backend_path.rsplit(".", 1)[-1]
    if _is_identity_provider(backend):
        return "oidc"
    return "password" if issubclass(backend, ModelBackend) else backend.__name__


def _is_identity_provider(backend) -> bool:
    try:
        from mozilla_django_oidc.auth import OIDCAuthenticationBackend
    except ImportError:
        return False
    return issubclass(backend, OIDCAuthenticationBackend)


def _session_method(request, user) -> str:
    session = getattr(request, "session", None)
    path = (session.get(BACKEND_SESSION_KEY) if session is not None else None) or getattr(
        user, "backend", ""
    )
    return sign_in_method(path or "")


def _signed_in(sender, request, user, **kwargs):
    method = _session_method(request, user)
    if method == "oidc":
        return  # the identity provider's sign-in records its own, with what it said
    subject = f"{user.get_username()} signed in"
    record(Kind.SIGN_IN, person=user, via=method, request=request, subject=subject)


def _signed_out(sender, request, user, **kwargs):
    if user is None:
        return  # nobody was signed in
    method = _session_method(request, user)
    subject = f"{user.get_username()} signed out"
    record(Kind.SIGN_OUT, person=user, via=method, request=request, subject=subject)


def _refused(sender, credentials, request=None, **kwargs):
    """A refused password: the name tried and the address, never what else was sent. (The
    identity provider's refusals are recorded by its own sign-in, console.oidc.)"""
    if "password" not in credentials:
        return
    tried = str(credentials.get("username") or credentials.get(_username_field()) or "")[:150]
    AuditEvent.record(
        Kind.SIGN_IN_REFUSED,
        **{**who(via="password", request=request), "actor": None, "actor_name": tried},
        subject=f"sign-in refused for '{tried}'",
    )


def _username_field() -> str:
    return get_user_model().USERNAME_FIELD


# --- roles -----------------------------------------------------------------------------


def _groups_changed(sender, instance, action, reverse, model, pk_set, **kwargs):
    """A user's global roles (their groups), changed from either side of the relation."""
    if action == "pre_clear":
        instance._audit_cleared = _cleared(instance, reverse)
        return
    if action not in ("post_add", "post_remove", "post_clear"):
        return
    if action == "post_clear":
        changed = getattr(instance, "_audit_cleared", {})
    elif reverse:  # group.user_set.add(...): the users of one group
        changed = {user: [instance.name] for user in model.objects.filter(pk__in=pk_set or ())}
    else:
        names = model.objects.filter(pk__in=pk_set or ()).values_list("name", flat=True)
        changed = {instance: list(names)} if names else {}
    added = action == "post_add"
    for user, roles in changed.items():
        after = roles_of(user)
        before = sorted(set(after) - set(roles)) if added else sorted({*after, *roles})
        words = ", ".join(f"{'now' if added else 'no longer'} {role}" for role in sorted(roles))
        _role_event(user, words, before, after)


def _cleared(instance, reverse) -> dict:
    if reverse:
        return {user: [instance.name] for user in instance.user_set.all()}
    names = list(instance.groups.values_list("name", flat=True))
    return {instance: names} if names else {}


# How an account's being an administrator or staff reads among its roles.
FLAGS = {"is_superuser": "administrator", "is_staff": "staff"}


def roles_of(user, flags: dict | None = None) -> list[str]:
    """An account's global roles: its groups, and administrator and staff when it is (as
    `flags` says, else as it is now)."""
    flags = flags if flags is not None else {flag: getattr(user, flag) for flag in FLAGS}
    held = [FLAGS[flag] for flag, on in flags.items() if on]
    return sorted([*user.groups.values_list("name", flat=True), *held])


def _role_event(user, words: str, before: list[str], after: list[str]) -> None:
    name = user.get_username()
    record(Kind.ROLE_CHANGED, subject=f"{name}: {words}", user=name, before=before, after=after)


@_saved_by_code
def _before_user_saved(sender, instance, update_fields=None, **kwargs):
    if instance.pk is None or (update_fields is not None and not set(FLAGS) & set(update_fields)):
        instance._audit_flags = None
        return
    instance._audit_flags = sender.objects.filter(pk=instance.pk).values(*FLAGS).first()


@_saved_by_code
def _user_saved(sender, instance, created, **kwargs):
    before = getattr(instance, "_audit_flags", None)
    if before is None and not created:
        return
    before = before or dict.fromkeys(FLAGS, False)
    changed = [flag for flag in FLAGS if getattr(instance, flag) != before[flag]]
    if not changed:
        return
    words = ", ".join(
        f"{'now' if getattr(instance, flag) else 'no longer'} {FLAGS[flag]}" for flag in changed
    )
    _role_event(instance, words, roles_of(instance, before), roles_of(instance))


@_saved_by_code
def _before_membership_saved(sender, instance, **kwargs):
    before = (
        Membership.objects.filter(pk=instance.pk).values_list("role", flat=True).first()
        if instance.pk
        else None
    )
    instance._audit_role = before


@_saved_by_code
def _membership_saved(sender, instance, created, **kwargs):
    before = getattr(instance, "_audit_role", None)
    if not created and before == instance.role:
        return
    name = instance.user.get_username()
    change = f"{before} → {instance.role}" if before else instance.role
    _membership_event(instance, f"{name}: {change} in {instance.project}", before, instance.role)


def _membership_deleted(sender, instance, origin=None, **kwargs):
    name = instance.user.get_username()
    words = f"{name}: no longer {instance.role} in {instance.project}"
    # A project being deleted takes its memberships along: the event cannot point at it.
    gone = isinstance(origin, Project) or _is_queryset_of(origin, Project)
    _membership_event(instance, words, instance.role, None, project_gone=gone)


def _is_queryset_of(origin, model) -> bool:
    return getattr(origin, "model", None) is model


def _membership_event(membership, subject, before, after, *, project_gone=False):
    record(
        Kind.MEMBERSHIP_CHANGED,
        project=None if project_gone else membership.project,
        subject=subject,
        user=membership.user.get_username(),
        before=before,
        after=after,
        project_slug=membership.project.slug,
    )


# --- tokens ----------------------------------------------------------------------------


def _token_fields(token) -> dict:
    """What names a token in the log: its name, prefix and owner, never its secret."""
    return {
        "token": token.prefix,
        "name": token.name,
        "owner": token.user.get_username(),
        "scope": token.scope,
    }


def _token_subject(token, words: str) -> str:
    return (
        f"token {token.prefix}… ({token.name or 'unnamed'}) of {token.user.get_username()} {words}"
    )


@_saved_by_code
def _before_token_saved(sender, instance, **kwargs):
    instance._audit_revoking = bool(
        instance.pk
        and instance.revoked_at is not None
        and ApiToken.objects.filter(pk=instance.pk, revoked_at__isnull=True).exists()
    )


@_saved_by_code
def _token_saved(sender, instance, created, **kwargs):
    if created:
        # The token's projects are set right after its row (the admin's form, `issue`):
        # they complete this event (`_token_projects_changed`).
        instance._audit_event = record(
            Kind.TOKEN_CREATED,
            subject=_token_subject(instance, "created"),
            projects=[],
            **_token_fields(instance),
        )
    elif getattr(instance, "_audit_revoking", False):
        instance._audit_revoking = False
        record(
            Kind.TOKEN_REVOKED,
            subject=_token_subject(instance, "revoked"),
            projects=_slugs(instance),
            **_token_fields(instance),
        )


def _slugs(token) -> list[str]:
    return sorted(token.projects.values_list("slug", flat=True))


def _token_projects_changed(sender, instance, action, reverse, **kwargs):
    if reverse or action not in ("post_add", "post_remove", "post_clear"):
        return
    projects = _slugs(instance)
    created = getattr(instance, "_audit_event", None)
    if created is not None:
        created.data["projects"] = projects
        created.save(update_fields=["data"])
        return
    # A token's projects narrowed or widened later: what it may reach changed.
    reach = ", ".join(projects) or "every project of its owner"
    record(
        Kind.ROLE_CHANGED,
        subject=_token_subject(instance, f"now limited to: {reach}"),
        projects=projects,
        **_token_fields(instance),
    )


# --- decisions and recipe edits ----------------------------------------------------------


@_saved_by_code
def _answered(sender, instance, created, **kwargs):
    if not created:
        return
    run = instance.run
    AuditEvent.record(
        Kind.DECISION,
        **{**who(instance.by, instance.via), "actor": instance.by, "actor_name": instance.by_name},
        project=run.project,
        subject=f"run {run.pk} gate {instance.gate_id}: {instance.decision}",
        run=run.pk,
        gate=instance.gate_id,
        decision=instance.decision,
        text=instance.text[:1000],
        digest=instance.digest,
        closed_gate=instance.closed_gate,
    )


@_saved_by_code
def _version_made(sender, instance, created, **kwargs):
    if not created:
        return
    recipe = instance.recipe
    record(
        Kind.RECIPE_EDITED,
        person=instance.author,
        project=recipe.project,
        subject=f"{recipe.slug} v{instance.number}",
        recipe=recipe.slug,
        version=instance.number,
        note=instance.note,
    )


def connect() -> None:
    from recipes.models import RecipeVersion
    from runs.models import GateResponse

    user_model = get_user_model()
    user_logged_in.connect(_signed_in, dispatch_uid="audit_sign_in")
    user_logged_out.connect(_signed_out, dispatch_uid="audit_sign_out")
    user_login_failed.connect(_refused, dispatch_uid="audit_sign_in_refused")
    m2m_changed.connect(
        _groups_changed, sender=user_model.groups.through, dispatch_uid="audit_groups"
    )
    pre_save.connect(_before_user_saved, sender=user_model, dispatch_uid="audit_user_flags")
    post_save.connect(_user_saved, sender=user_model, dispatch_uid="audit_user_flags")
    pre_save.connect(_before_membership_saved, sender=Membership, dispatch_uid="audit_membership")
    post_save.connect(_membership_saved, sender=Membership, dispatch_uid="audit_membership")
    post_delete.connect(_membership_deleted, sender=Membership, dispatch_uid="audit_membership")
    pre_save.connect(_before_token_saved, sender=ApiToken, dispatch_uid="audit_token")
    post_save.connect(_token_saved, sender=ApiToken, dispatch_uid="audit_token")
    m2m_changed.connect(
        _token_projects_changed,
        sender=ApiToken.projects.through,
        dispatch_uid="audit_token_projects",
    )
    post_save.connect(_answered, sender=GateResponse, dispatch_uid="audit_decision")
    post_save.connect(_version_made, sender=RecipeVersion, dispatch_uid="audit_recipe_edit")


# --- reading: the page and the export -----------------------------------------------------

FIELDS = ("id", "at", "kind", "actor", "via", "project", "subject", "address", "data")


def events(
    *,
    kind: str = "",
    person: str = "",
    project: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
):
    """The events matching the filters (`person`: a username, as recorded)."""
    found = AuditEvent.objects.select_related("project")
    if kind:
        found = found.filter(kind=kind)
    if person:
        found = found.filter(actor_name__iexact=person)
    if project:
        found = found.filter(project__slug=project)
    if since is not None:
        found = found.filter(at__gte=since)
    if until is not None:
        found = found.filter(at__lt=until)
    return found


def row(event: AuditEvent) -> dict:
    return {
        "id": event.pk,
        "at": event.at.isoformat(),
        "kind": event.kind,
        "actor": event.actor_name,
        "via": event.via,
        "project": event.project.slug if event.project_id else "",
        "subject": event.subject,
        "address": event.address or "",
        "data": event.data,
    }


def lines(found, fmt: str):
    """The export, oldest first, a line (or a CSV record) at a time (runs.audit)."""
    from runs.audit import stream

    return stream(found, fmt, fields=FIELDS, to_row=row)
