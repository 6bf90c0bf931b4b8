"""The toy's recipe format: a YAML mapping that starts with `toy:` (a key no other kind
reads), e.g.

    toy: counter
    rounds: 3
    gate_after: 2

Its spec looks like a one-node workflow to the kernel: node `count`, of node kind `toy`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from recipes.problems import LoadResult, Problem
from runs.kinds import KernelNode

KIND = "toy"
NODE_ID = "count"
FIELDS = {"toy", "name", "description", "rounds", "gate_after"}


@dataclass
class ToySpec:
    name: str
    rounds: int
    gate_after: int
    description: str = ""
    kind: str = KIND
    inputs: dict = field(default_factory=dict)
    budget: dict = field(default_factory=dict)
    provider: str | None = None
    model: str | None = None

    @property
    def nodes(self) -> list[KernelNode]:
        return [self.node(NODE_ID)]

    def layers(self) -> list[list[str]]:
        return [[NODE_ID]]

    def node(self, node_id: str) -> KernelNode:
        if node_id != NODE_ID:
            raise KeyError(node_id)
        details = (f"counts to {self.rounds}", f"a person decides after {self.gate_after}")
        return KernelNode(id=NODE_ID, kind=KIND, details=details)


def read(source: str) -> LoadResult | None:
    """The toy's recipe from its text: None for a source that is not a toy recipe."""
    try:
        data = yaml.safe_load(source)
    except yaml.YAMLError:
        return None
    if not isinstance(data, dict) or KIND not in data:
        return None
    errors = [
        Problem(name, 1, 1, f"{name} must be a whole number of at least 1")
        for name in ("rounds", "gate_after")
        if not isinstance(data.get(name), int) or data[name] < 1
    ]
    warnings = [Problem(str(k), 1, 1, f"unknown field {k!r} is ignored") for k in data]
    warnings = [w for w in warnings if w.path not in FIELDS]
    if errors:
        return LoadResult(kind=KIND, spec=None, errors=errors, warnings=warnings)
    spec = ToySpec(
        name=str(data.get("name") or f"Toy {data[KIND]}"),
        description=str(data.get("description") or ""),
        rounds=data["rounds"],
        gate_after=data["gate_after"],
    )
    return LoadResult(kind=KIND, spec=spec, warnings=warnings)
