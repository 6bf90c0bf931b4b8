from django.conf import settings


def console(request):
    user = getattr(request, "user", None)
    return {
        "HTMX_SCRIPT": settings.HTMX_SCRIPT,
        "can_operate": bool(user and user.has_perm("runs.operate_run")),
        "can_edit_recipes": bool(user and user.has_perm("recipes.change_recipe")),
    }
