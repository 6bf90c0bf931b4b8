"""Load the spec of a run: its pinned recipe version with the files it started with.

A run is fixed at its start (`snapshot_spec`): its recipe version is immutable, and the
command files and included workflows that version uses are read then and kept on the run
(`Run.snapshot`); every later load of the run's spec reads those texts, never the disk
(recipes.formats.snapshot). An edited file reaches the next run at once; a run in flight
keeps what it started with, even when the file is edited or deleted while it waits at a
gate."""

import json
from functools import lru_cache

from recipes.formats import snapshot as files
from recipes.validation import validate_source


class SpecError(Exception):
    pass


@lru_cache(maxsize=256)
def _load(version_id: int, source: str, source_path: str, snapshot: str | None):
    """`snapshot`: the run's, as JSON (a cache key); None reads the disk."""
    if snapshot is None:
        result = validate_source(source, source_path, providers=False)
    else:
        with files.replaying(json.loads(snapshot)):
            result = validate_source(source, source_path, providers=False)
    if not result.ok:
        raise SpecError("; ".join(str(p) for p in result.errors[:5]))
    return result.spec


def spec_of(recipe, version):
    """`version` as it loads (cached per version: a page that shows a recipe; a run reads
    its own spec with `spec_for`)."""
    return _load(version.pk, version.source, recipe.source_path, None)


def snapshot_spec(recipe, version) -> tuple[object, dict]:
    """`version` loaded afresh from the disk for a new run: its spec, and the run's snapshot
    (the command files and included workflows it used) to keep on the run."""
    with files.recording() as snapshot:
        result = validate_source(version.source, recipe.source_path, project_id=recipe.project_id)
    if not result.ok:
        raise SpecError("; ".join(str(p) for p in result.errors[:5]))
    return result.spec, snapshot


def spec_for(run):
    """The run's spec: its version with the files it started with."""
    version = run.recipe_version
    kept = json.dumps(run.snapshot or {}, sort_keys=True)
    return _load(version.pk, version.source, run.recipe.source_path, kept)


def node_spec(spec, node_id: str):
    """Find a node by its namespaced id (`group.node` for a loop_group's body)."""
    if "." not in node_id:
        return spec.node(node_id)
    group_id, body_id = node_id.split(".", 1)
    group = spec.node(group_id)
    for body in group.loop_group.nodes:
        if body.id == body_id:
            return body
    raise KeyError(node_id)


def scope_nodes(spec, group_id: str | None):
    if group_id is None:
        return spec.nodes
    return spec.node(group_id).loop_group.nodes


def scope_layers(spec, group_id: str | None) -> list[list[str]]:
    if group_id is None:
        return spec.layers()
    return spec.node(group_id).loop_group.layers()
