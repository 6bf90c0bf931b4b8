"""The toy kind as the registry knows it: a runs.kinds.LoopKind subclass overriding only
what it needs. It declares no shell parts, so its whole source counts as shell
(recipes.shell_parts fails closed)."""

from runs.kinds import LoopKind

from . import recipe, runner


class ToyKind(LoopKind):
    name = recipe.KIND
    label = "Toy counter"
    nodes = {recipe.KIND: runner.start}
    phases = runner.PHASES

    def reads(self, source):
        return recipe.read(source.text)

    def gate_decided(self, run, gate, node_run, status, actor):
        runner.gate_decided(run, gate, node_run, status, actor)


TOY = ToyKind()
