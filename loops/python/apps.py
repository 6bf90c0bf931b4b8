from django.apps import AppConfig

OLD_NAME = "recipes.python"  # this package's name until issue 35 moved the kinds


class PythonLoopsConfig(AppConfig):
    """The Python kind (`LoopWorkflow`): registers what it plugs into the kernel."""

    name = "loops.python"
    label = "pyloops"
    verbose_name = "Python loops"

    def ready(self):
        import sys

        from runs import kinds

        from .kind import PythonKind

        kinds.register(PythonKind())
        # Python recipes written before the kinds had a folder import `recipes.python`: the
        # same module under its old name, so their runs (and the files) still load.
        sys.modules.setdefault(OLD_NAME, sys.modules[self.name])
