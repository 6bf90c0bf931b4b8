"""The roles as view decorators: logged in (else the login page), holding the role's
permission (else 403)."""

from django.contrib.auth.decorators import login_required, permission_required


def role_required(permission: str):
    def decorator(view):
        return login_required(permission_required(permission, raise_exception=True)(view))

    return decorator


viewer_required = role_required("runs.view_run")  # viewers, operators, editors
operator_required = role_required("runs.operate_run")  # start, cancel, resume, decide
recipe_reader_required = role_required("recipes.view_recipe")
