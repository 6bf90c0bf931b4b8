"""The toy kind as the registry knows it (runs.kinds.LoopKind)."""

from runs.kinds import LoopKind

from . import recipe, runner

TOY = LoopKind(
    name=recipe.KIND,
    label="Toy counter",
    reads=recipe.read,
    nodes={recipe.KIND: runner.start},
    gate_decided=runner.gate_decided,
)
