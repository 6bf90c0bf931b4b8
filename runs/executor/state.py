"""Helpers every executor module shares: the run's row lock, a retry on a fresh database
connection, and the max_iterations message. The transitions themselves live on the models
(runs/models/) and sending work lives in runs/dispatch.py."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError, connection

from runs.models import Run


def on_fresh_connection(work, *args, **kwargs):
    """Run `work`; if the database connection was lost (a restarted server, a dropped
    session), run it once more on a new one. Only for work outside a transaction whose
    writes are conditional (claims, finishes): a retry after an unseen commit does nothing."""
    try:
        return work(*args, **kwargs)
    except (OperationalError, InterfaceError):
        if connection.in_atomic_block:
            raise
        connection.close()
        return work(*args, **kwargs)


def lock_run(run_id: int, *, with_recipe: bool = True) -> Run | None:
    runs = Run.objects.select_for_update()
    if with_recipe:  # most callers read the spec; the iteration hot path does not
        runs = runs.select_related("recipe_version", "recipe")
    return runs.filter(pk=run_id).first()


def max_iterations_error(node_id: str, loop_spec) -> str:
    declared = [
        f"{name}: {value}"
        for name, value in (
            ("until", loop_spec.until),
            ("until_bash", loop_spec.until_bash),
            ("until_field", getattr(loop_spec, "until_field", None)),
        )
        if value
    ]
    return (
        f"'{node_id}' reached max_iterations ({loop_spec.max_iterations}) without meeting a "
        f"completion condition ({'; '.join(declared)})"
    )
