"""Load the pinned recipe version of a run (cached per version: versions never change)."""

from functools import lru_cache

from recipes.validation import validate_source


class SpecError(Exception):
    pass


@lru_cache(maxsize=256)
def _load(version_id: int, source: str, source_path: str):
    result = validate_source(source, source_path, providers=False)
    if not result.ok:
        raise SpecError("; ".join(str(p) for p in result.errors[:5]))
    return result.spec


def spec_of(recipe, version):
    return _load(version.pk, version.source, recipe.source_path)


def spec_for(run):
    return spec_of(run.recipe, run.recipe_version)


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
