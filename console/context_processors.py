from django.conf import settings


def console(request):
    user = getattr(request, "user", None)
    return {
        "HTMX_SCRIPT": settings.HTMX_SCRIPT,
        "sandbox_banner": _sandbox_banner(user),
        "can_operate": bool(user and user.has_perm("runs.operate_run")),
        "can_edit_recipes": bool(user and user.has_perm("recipes.change_recipe")),
    }


def _sandbox_banner(user) -> str:
    """Staff are told, on every page, when steps and agents run unsandboxed."""
    if not (user and user.is_authenticated and user.is_staff):
        return ""
    from runs.sandbox.report import banner

    return banner()
