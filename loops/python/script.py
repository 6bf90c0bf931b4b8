"""`await workflow.run(...)` from a script: the recipe it belongs to, and its run."""

from __future__ import annotations

import sys
from pathlib import Path

from django.db import transaction

from loops.python.format import NODE_ID, RECIPE_KIND
from recipes import editing
from recipes.models import Recipe
from recipes.sync import slug_for
from runs import services
from runs.actor import Actor
from runs.executor.state import lock_run
from runs.models import NodeRun, Run

from .results import WorkflowError

# A script started from a shell: the command line, read as "script" on every page.
SCRIPT = Actor("cli", label="script")


def defining_file(root) -> Path | None:
    """The file whose module holds the workflow at module level (a recipe file run as a
    script, or imported by one), else the script itself."""
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None) or {}
        if any(value is root for value in list(namespace.values())):
            path = getattr(module, "__file__", None)
            if path and path.endswith(".py"):
                return Path(path).resolve()
    main = getattr(sys.modules.get("__main__"), "__file__", None)
    return Path(main).resolve() if main and main.endswith(".py") else None


def recipe_for(root) -> Recipe:
    """The recipe of the file defining `root`: the synced one when the file is in a recipe
    folder (a new version if the file changed), else one recorded for the script. Made
    the one way recipes are made (recipes.editing.load_file)."""
    path = defining_file(root)
    if path is None:
        raise WorkflowError("cannot tell which file defines this workflow; run it from a .py file")
    source = path.read_text(encoding="utf-8")
    slug = slug_for(path)
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().filter(slug=slug).first()
        if recipe is not None and recipe.kind != RECIPE_KIND:
            raise WorkflowError(
                f"the recipe '{slug}' is a {recipe.kind} recipe; rename {path.name} so its "
                "runs get a recipe of their own"
            )
        if recipe is not None and recipe.source == source and recipe.current_version_id:
            return recipe
        loaded = editing.load_file(
            slug,
            source,
            origin=recipe.origin if recipe is not None else Recipe.Origin.SCRIPT,
            source_path=str(path),
            note="recorded from a script",
        )
    if loaded.action == "kept":
        raise WorkflowError(
            f"the recipe '{slug}' was {loaded.reason}; {path.name} does not replace it"
        )
    return loaded.recipe


def start_script_run(root, text: str) -> tuple[Run, NodeRun]:
    """A run that this process executes, started through the services like any other;
    its `workflow` node is claimed here in the same transaction, so no worker takes it
    while the script lives (if the script dies, the lease expires and the sweep hands the
    node to a worker, which replays what was recorded)."""
    recipe = recipe_for(root)
    with transaction.atomic():
        run = services.start_run(recipe, actor=SCRIPT, message=text)
        run = lock_run(run.pk, with_recipe=False)
        row = NodeRun.objects.create_claimed(run, NODE_ID, "python")
        run.start()
        run.append_event("node_started", NODE_ID, kind="python")
    return run, row
