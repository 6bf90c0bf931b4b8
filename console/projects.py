"""Projects: who may do what where. The one rule of every surface.

A role is granted globally (a Django group: viewer, operator, editor, recipe author with
shell; administrators are superusers) or in one project (a `Membership`). A permission
holds on an object when the user holds it globally, or through their membership of the
object's project. Every check goes through `has_perm` (Django's backends: `ProjectBackend`
below answers for memberships), and every list through `projects_where` /
`visible` — so an object of a project the user has nothing in is, on every surface, one
that does not exist (404), never one they may not touch (403).

An API token may be limited to some projects (`ApiToken.projects`): `projects_where`
narrows to them, and `console.auth.limit_to_scope` makes `has_perm` answer so."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.contrib.auth.backends import BaseBackend

from console.roles import ROLES

# What each role grants, as "app.codename" strings.
ROLE_PERMISSIONS = {
    role: frozenset(f"{app}.{codename}" for app, codename in perms) for role, perms in ROLES.items()
}


def project_of(obj):
    """The project an object belongs to: its own, its run's or its recipe's (None: none)."""
    from console.models import Project

    if obj is None or isinstance(obj, Project):
        return obj
    for attribute in ("project", "run", "recipe", "gate"):
        found = getattr(obj, attribute, None)
        if found is not None and found is not obj:
            return project_of(found)
    return None


def _global(user, perm: str) -> bool:
    """Held in every project: a superuser's, or a global role's (the user's groups)."""
    if not user.is_active:
        return False
    if user.is_superuser:
        return True
    return perm in user.get_group_permissions() or perm in user.get_user_permissions()


def _token(user):
    return getattr(user, "api_token", None)


def member_projects(user, perm: str) -> set[int]:
    """Ids of the projects where a membership of `user` grants `perm` (cached per user)."""
    user = getattr(user, "_wrapped", user)  # request.user is a lazy object: cache on the user
    cache = user.__dict__.setdefault("_project_perms", None)
    if cache is None:
        from console.models import Membership

        cache = {}
        for project_id, role in Membership.objects.filter(user=user).values_list(
            "project_id", "role"
        ):
            for granted in ROLE_PERMISSIONS.get(role, ()):
                cache.setdefault(granted, set()).add(project_id)
        user.__dict__["_project_perms"] = cache
    return cache.get(perm, set())


def projects_where(user, perm: str):
    """The projects where `user` holds `perm`, narrowed to its token's projects."""
    from console.models import Project

    if user is None or not user.is_authenticated or not user.is_active:
        return Project.objects.none()
    found = (
        Project.objects.all()
        if _global(user, perm)
        else Project.objects.filter(pk__in=member_projects(user, perm))
    )
    token = _token(user)
    if token is not None and token.limited_to_projects:
        found = found.filter(pk__in=token.project_ids)
    return found


def visible(queryset, user, perm: str, field: str = "project"):
    """`queryset` narrowed to the objects in projects where `user` holds `perm`."""
    return queryset.filter(**{f"{field}__in": projects_where(user, perm)})


def default_among(projects):
    """The default project, when it is among `projects` (a queryset): where a new object
    goes when nobody named a project; else None."""
    from console.models import Project

    default = Project.default()
    return default if projects.filter(pk=default.pk).exists() else None


def in_project(user, perm: str, project) -> bool:
    if project is None:
        return _global(user, perm)
    token = _token(user)
    if token is not None and token.limited_to_projects and project.pk not in token.project_ids:
        return False
    return _global(user, perm) or project.pk in member_projects(user, perm)


class ProjectBackend(BaseBackend):
    """Answers `has_perm` from memberships: on an object, through its project; without
    one, when any membership grants it (the pages let the user in; their lists narrow)."""

    def has_perm(self, user_obj, perm, obj=None):
        if not user_obj.is_active or user_obj.is_anonymous:
            return False
        if obj is None:
            return bool(member_projects(user_obj, perm))
        return in_project(user_obj, perm, project_of(obj))

    async def ahas_perm(self, user_obj, perm, obj=None):
        return await sync_to_async(self.has_perm)(user_obj, perm, obj)
