from django.apps import AppConfig


class StepMachineConfig(AppConfig):
    """The step-machine kind: registers what it plugs into the kernel."""

    name = "recipes.planeai"
    label = "planeai"
    verbose_name = "Step machines"

    def ready(self):
        pass
