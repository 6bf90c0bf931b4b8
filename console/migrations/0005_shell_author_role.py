"""The 'recipe author with shell' role: editors who may also write shell in recipes."""

from importlib import import_module

from django.db import migrations

from console.roles import SHELL_AUTHOR

# The same step as the first roles migration: create permissions, then every role's group.
create_roles = import_module("console.migrations.0001_roles").create_roles


def remove_shell_author(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=SHELL_AUTHOR).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("console", "0004_metrics_token_scope"),
        ("recipes", "0003_shell_permission"),
    ]
    operations = [migrations.RunPython(create_roles, remove_shell_author)]
