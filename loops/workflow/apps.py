from django.apps import AppConfig


class WorkflowConfig(AppConfig):
    """The YAML workflow kind: registers what it plugs into the kernel."""

    name = "loops.workflow"
    label = "workflow"
    verbose_name = "Workflows"

    def ready(self):
        from runs import kinds

        from .kind import WorkflowKind

        kinds.register(WorkflowKind())
