from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from recipes import validation
        from runs import worktree
        from runs.providers import registry

        worktree.connect()
        # The catalogue's verdicts ask the kernel's providers without importing the kernel.
        validation.use_providers(
            validation.ProviderLookups(
                default_configured=registry.default_configured,
                unresolvable=registry.unresolvable,
            )
        )
