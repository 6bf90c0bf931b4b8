from django.apps import AppConfig


class LoopsConfig(AppConfig):
    """The driven kind (seed 004, `kind: driven`): registers what it plugs into the kernel."""

    name = "loops"
    verbose_name = "Driven loops"

    def ready(self):
        from runs import kinds

        from .kind import driven_loops

        kinds.register(driven_loops())
