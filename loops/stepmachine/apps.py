from django.apps import AppConfig


class StepMachineConfig(AppConfig):
    """The step-machine kind: registers what it plugs into the kernel."""

    name = "loops.stepmachine"
    label = "planeai"
    verbose_name = "Step machines"

    def ready(self):
        from runs import kinds

        from .kind import StepMachineKind

        kinds.register(StepMachineKind())
