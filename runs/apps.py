from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        from django.core import checks

        from recipes import readers, validation
        from runs import kinds, telemetry, worktree
        from runs.checks import recipes_of_unknown_kinds
        from runs.providers import registry

        checks.register(recipes_of_unknown_kinds)
        readers.use_registry(kinds)  # the catalogue asks the kinds without importing runs
        worktree.connect()
        telemetry.connect()  # runs as OpenTelemetry traces, when an OTLP endpoint is set
        # The catalogue's verdicts ask the kernel's providers without importing the kernel.
        validation.use_providers(
            validation.ProviderLookups(
                default_configured=registry.default_configured,
                unresolvable=registry.unresolvable,
            )
        )
