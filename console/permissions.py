"""The roles as view decorators: logged in (else the login page), holding the role's
permission (else a 403 page that names the missing role)."""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied

# Which role grants what a view needs: the 403 page tells the user what to ask for.
ROLE_FOR = {
    "runs.view_run": "viewer",
    "recipes.view_recipe": "viewer",
    "runs.operate_run": "operator",
}


class RoleMissing(PermissionDenied):
    def __init__(self, role: str):
        super().__init__(f"This page needs the {role} role.")
        self.role = role


def role_required(permission: str):
    role = ROLE_FOR.get(permission, "editor")

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.has_perm(permission):
                raise RoleMissing(role)
            return view(request, *args, **kwargs)

        return login_required(wrapped)

    return decorator


viewer_required = role_required("runs.view_run")  # viewers, operators, editors
_operator_role = role_required("runs.operate_run")


def operator_required(view):
    """Start, cancel, resume, decide: the permission is checked here, once, and the view
    gets `request.actor` (the console actor every service it calls records)."""
    from runs.actor import Actor

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        request.actor = Actor("console", request.user)
        return view(request, *args, **kwargs)

    return _operator_role(wrapped)


recipe_reader_required = role_required("recipes.view_recipe")


def administrator_required(view):
    """Pages for administrators (superusers) only: the audit log."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        if not request.user.is_superuser:
            raise RoleMissing("administrator")
        return view(request, *args, **kwargs)

    return login_required(wrapped)
