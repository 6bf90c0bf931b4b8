from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_roles(sender, **kwargs):
    """After the last app's post_migrate: every app's permissions exist by then (the
    roles hold permissions of apps installed after this one)."""
    from django.apps import apps

    from console.roles import ensure_roles

    if sender is [config for config in apps.get_app_configs() if config.models_module][-1]:
        ensure_roles()


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Loop Console"

    def ready(self):
        post_migrate.connect(_ensure_roles)
        from console import throttle  # noqa: F401 - connects the sign-in counters
        from console.audit import connect as connect_audit_log

        connect_audit_log()
