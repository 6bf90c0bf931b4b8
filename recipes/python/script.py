"""`await workflow.run(...)` from a script: the recipe it belongs to, and its run."""

from __future__ import annotations

import sys
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from recipes.formats.python import NODE_ID
from recipes.models import Recipe
from recipes.sync import slug_for
from recipes.validation import apply_result, validate_source
from runs.models import NodeRun, Run

from .results import WorkflowError


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
    folder (a new version if the file changed), else one recorded for the script."""
    path = defining_file(root)
    if path is None:
        raise WorkflowError("cannot tell which file defines this workflow; run it from a .py file")
    source = path.read_text(encoding="utf-8")
    slug = slug_for(path)
    with transaction.atomic():
        recipe = Recipe.objects.select_for_update().filter(slug=slug).first()
        if recipe is not None and recipe.kind != Recipe.Kind.PYTHON:
            raise WorkflowError(
                f"the recipe '{slug}' is a {recipe.kind} recipe; rename {path.name} so its "
                "runs get a recipe of their own"
            )
        if recipe is None:
            recipe = Recipe(slug=slug, origin=Recipe.Origin.SCRIPT, source_path=str(path))
        if recipe.source != source or recipe.current_version_id is None:
            apply_result(recipe, validate_source(source, str(path)))
            recipe.source = source
            recipe.save()
            recipe.record_version(source, note="recorded from a script")
    return recipe


def start_script_run(root, text: str) -> tuple[Run, NodeRun]:
    """A run that this process executes: its `workflow` node is claimed here at once, so
    no worker takes it while the script lives (if the script dies, the lease expires and
    the sweep hands the node to a worker, which replays what was recorded)."""
    recipe = recipe_for(root)
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(recipe=recipe, recipe_version=recipe.current_version, message=text)
        base = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk)
        (base / "work").mkdir(parents=True, exist_ok=True)
        (base / "artifacts").mkdir(parents=True, exist_ok=True)
        run.append_event(
            "run_created", recipe=recipe.slug, version=recipe.current_version.number, by="script"
        )
        run.set_status(Run.Status.RUNNING)
        row = NodeRun.objects.create(
            run=run,
            node_id=NODE_ID,
            kind="python",
            status=NodeRun.Status.RUNNING,
            attempts=1,
            queued_at=now,
            started_at=now,
            lease_expires_at=now + timedelta(seconds=settings.LOOP_LEASE_SECONDS),
        )
        run.append_event("node_started", NODE_ID, kind="python")
    return run, row
