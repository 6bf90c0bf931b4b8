"""The roles. Viewers read; operators start, cancel, resume and decide at gates; editors
also change recipes, except their shell; a recipe author with shell may also write shell
(bash steps, until_bash checks, command and inline providers), which runs on the workers.
Created by migrations and kept present after every migrate (a database flush in tests,
say) by a post_migrate handler."""

VIEW = [
    ("recipes", "view_recipe"),
    ("recipes", "view_recipeversion"),
    ("runs", "view_run"),
    ("runs", "view_gate"),
    ("triggers", "view_schedule"),
    ("triggers", "view_schedulefiring"),
    ("triggers", "view_webhook"),
    ("triggers", "view_webhookdelivery"),
]
OPERATE = [("runs", "operate_run")]
# A schedule or a webhook starts runs of a recipe unattended: set up by who edits recipes.
EDIT = [
    ("recipes", "add_recipe"),
    ("recipes", "change_recipe"),
    ("recipes", "delete_recipe"),
    ("triggers", "add_schedule"),
    ("triggers", "change_schedule"),
    ("triggers", "delete_schedule"),
    ("triggers", "add_webhook"),
    ("triggers", "change_webhook"),
    ("triggers", "delete_webhook"),
]
SHELL = [("recipes", "write_shell")]
SHELL_AUTHOR = "recipe author with shell"
ROLES = {
    "viewer": VIEW,
    "operator": VIEW + OPERATE,
    "editor": VIEW + OPERATE + EDIT,
    SHELL_AUTHOR: VIEW + OPERATE + EDIT + SHELL,
}


def ensure_roles(group_model=None, permission_model=None) -> None:
    if group_model is None:
        from django.contrib.auth.models import Group as group_model
        from django.contrib.auth.models import Permission as permission_model
    for name, perms in ROLES.items():
        group, _ = group_model.objects.get_or_create(name=name)
        wanted = permission_model.objects.filter(
            content_type__app_label__in={app for app, _ in perms},
            codename__in={code for _, code in perms},
        )
        group.permissions.add(
            *[p for p in wanted if (p.content_type.app_label, p.codename) in perms]
        )
