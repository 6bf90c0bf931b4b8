from django.apps import AppConfig

OLD_EXAMPLE_HOOKS = "loops.example_hooks"  # the example hooks' module until issue 35


class DrivenLoopsConfig(AppConfig):
    """The driven kind (`kind: driven`): registers what it plugs into the kernel."""

    name = "loops.driven"
    label = "loops"  # its tables and migrations were named before the kinds had a folder
    verbose_name = "Driven loops"

    def ready(self):
        import sys

        from runs import kinds, signals

        from . import example_hooks
        from .kind import DrivenKind
        from .models import Loop

        kinds.register(DrivenKind())
        signals.run_ended.connect(
            Loop.close_with_run, weak=False, dispatch_uid="driven-loops-close"
        )
        # Recipes written before the kinds had a folder name the example hooks by their old
        # module: the same module under that name (LOOP_HOOK_MODULES allows both).
        sys.modules.setdefault(OLD_EXAMPLE_HOOKS, example_hooks)
