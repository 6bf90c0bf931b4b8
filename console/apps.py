from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _ensure_roles(sender, **kwargs):
    from console.roles import ensure_roles

    ensure_roles()


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Loop Console"

    def ready(self):
        post_migrate.connect(_ensure_roles, sender=self)
        from console import throttle  # noqa: F401 - connects the sign-in counters
