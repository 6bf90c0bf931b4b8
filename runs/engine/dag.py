"""The one DAG module: topological layering, cycle detection and trigger rules.

Recipe validation (cycles, with every ring reported), the spec's layers, the recipe
graph on pages and the engine's scheduler all use these functions.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Literal

__all__ = [
    "TERMINAL",
    "TRIGGER_RULES",
    "CycleError",
    "UnknownDependencyError",
    "find_cycle",
    "find_cycles",
    "layers",
    "trigger_decision",
]

TERMINAL = frozenset({"completed", "failed", "skipped", "cancelled"})
TRIGGER_RULES = ("all_success", "one_success", "none_failed_min_one_success", "all_done")

Decision = Literal["run", "skip", "wait"]


class CycleError(Exception):
    """The dependency graph has a cycle; ``cycle`` is closed (first id repeated last)."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__("dependency cycle: " + " -> ".join(cycle))


class UnknownDependencyError(ValueError):
    """A node depends on an id that is not part of the graph."""

    def __init__(self, node: str, missing: str) -> None:
        self.node = node
        self.missing = missing
        super().__init__(f"node '{node}' depends on unknown node '{missing}'")


def _check_known(deps: dict[str, list[str]]) -> None:
    for node, parents in deps.items():
        for parent in parents:
            if parent not in deps:
                raise UnknownDependencyError(node, parent)


def layers(deps: dict[str, list[str]]) -> list[list[str]]:
    """Kahn layering: each layer only depends on earlier layers.

    Inside a layer, nodes keep the insertion order of ``deps``; linear in the number of
    edges. Raises CycleError (naming one cycle) or UnknownDependencyError.
    """
    _check_known(deps)
    position = {node: i for i, node in enumerate(deps)}
    indegree = dict.fromkeys(deps, 0)
    dependents: dict[str, list[str]] = {node: [] for node in deps}
    for node, parents in deps.items():
        for parent in dict.fromkeys(parents):
            indegree[node] += 1
            dependents[parent].append(node)
    current = [node for node in deps if indegree[node] == 0]
    result: list[list[str]] = []
    placed = 0
    while current:
        result.append(current)
        placed += len(current)
        ready: list[tuple[int, str]] = []
        for node in current:
            for child in dependents[node]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    heapq.heappush(ready, (position[child], child))
        current = [heapq.heappop(ready)[1] for _ in range(len(ready))]
    if placed != len(deps):
        stuck = {node: parents for node, parents in deps.items() if indegree[node] > 0}
        raise CycleError(find_cycle(stuck) or list(stuck))
    return result


def find_cycle(deps: dict[str, list[str]]) -> list[str] | None:
    """One cycle as a closed path following ``depends_on`` edges, or None.

    ``["a", "b", "a"]`` means a depends on b and b depends on a. Dependencies on ids
    outside ``deps`` are ignored here.
    """
    rings = find_cycles(deps, list(deps), limit=1)
    return [*rings[0], rings[0][0]] if rings else None


def find_cycles(
    deps: dict[str, list[str]], order: Sequence[str], *, limit: int = 10
) -> list[list[str]]:
    """Distinct dependency cycles (at most ``limit``), each as a ring that starts at its
    first member in ``order``.

    Every member of a returned ring depends on the next one, and the last on the first.
    Iterative and bounded, so a hostile graph can neither exhaust the stack nor make the
    search quadratic.
    """
    position = {node_id: i for i, node_id in enumerate(order)}
    finished: set[str] = set()
    on_path: dict[str, int] = {}  # node -> index in ``trail``
    seen: set[frozenset[str]] = set()
    rings: list[list[str]] = []
    budget = limit * 10  # back edges we are willing to turn into rings
    for start in order:
        if start in finished:
            continue
        stack: list[tuple[str, int]] = [(start, 0)]
        trail = [start]
        on_path[start] = 0
        while stack:
            node, next_index = stack[-1]
            parents = deps.get(node, [])
            if next_index >= len(parents):
                stack.pop()
                trail.pop()
                del on_path[node]
                finished.add(node)
                continue
            stack[-1] = (node, next_index + 1)
            parent = parents[next_index]
            if parent in on_path:
                if budget <= 0:
                    continue
                budget -= 1
                cycle = trail[on_path[parent] :]
                if frozenset(cycle) not in seen:
                    seen.add(frozenset(cycle))
                    at = cycle.index(min(cycle, key=lambda n: position.get(n, 0)))
                    rings.append(cycle[at:] + cycle[:at])
                    if len(rings) >= limit:
                        return rings
            elif parent not in finished:
                on_path[parent] = len(trail)
                stack.append((parent, 0))
                trail.append(parent)
    return rings


def trigger_decision(rule: str, dep_statuses: list[str]) -> Decision:
    """Decide whether a node whose dependencies have these statuses runs.

    Any non-terminal dependency -> "wait". Otherwise:

    * ``all_success`` (default): every dependency completed.
    * ``one_success``: at least one completed.
    * ``none_failed_min_one_success``: none failed/cancelled, at least one completed.
    * ``all_done``: always run.

    A node with no dependencies always runs. ``when:`` is applied by the caller.
    """
    rule = rule or "all_success"
    if rule not in TRIGGER_RULES:
        raise ValueError(
            f"unknown trigger_rule {rule!r} (expected one of {', '.join(TRIGGER_RULES)})"
        )
    if not dep_statuses:
        return "run"
    if any(status not in TERMINAL for status in dep_statuses):
        return "wait"
    completed = sum(status == "completed" for status in dep_statuses)
    if rule == "all_success":
        ok = completed == len(dep_statuses)
    elif rule == "one_success":
        ok = completed >= 1
    elif rule == "none_failed_min_one_success":
        ok = completed >= 1 and not any(s in ("failed", "cancelled") for s in dep_statuses)
    else:  # all_done
        ok = True
    return "run" if ok else "skip"
