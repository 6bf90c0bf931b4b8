from django.apps import AppConfig


class PythonLoopsConfig(AppConfig):
    """The Python kind (`LoopWorkflow`): registers what it plugs into the kernel."""

    name = "recipes.python"
    label = "pyloops"
    verbose_name = "Python loops"

    def ready(self):
        from runs import kinds

        from .kind import python_loops

        kinds.register(python_loops())
