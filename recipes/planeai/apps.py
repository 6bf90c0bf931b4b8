from django.apps import AppConfig


class StepMachineConfig(AppConfig):
    """The step-machine kind (seed 003): registers what it plugs into the kernel."""

    name = "recipes.planeai"
    label = "planeai"
    verbose_name = "Step machines"

    def ready(self):
        from runs import kinds

        from .kind import step_machine

        kinds.register(step_machine())
