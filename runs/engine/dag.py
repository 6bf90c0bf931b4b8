"""DAG helpers: topological layering, cycle detection and trigger rules."""

from __future__ import annotations

from typing import Literal

__all__ = [
    "TERMINAL",
    "TRIGGER_RULES",
    "CycleError",
    "UnknownDependencyError",
    "find_cycle",
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


def find_cycle(deps: dict[str, list[str]]) -> list[str] | None:
    """Return one cycle as a closed path following ``depends_on`` edges, or None.

    ``["a", "b", "a"]`` means a depends on b and b depends on a. Dependencies on
    ids outside ``deps`` are ignored here. Iterative, so deep graphs are fine.
    """
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(deps, white)
    for start in deps:
        if color[start] != white:
            continue
        path: list[str] = [start]
        iters = [iter(deps[start])]
        color[start] = grey
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                color[path.pop()] = black
                iters.pop()
                continue
            if nxt not in color:
                continue
            if color[nxt] == grey:
                return path[path.index(nxt) :] + [nxt]
            if color[nxt] == white:
                color[nxt] = grey
                path.append(nxt)
                iters.append(iter(deps[nxt]))
    return None


def layers(deps: dict[str, list[str]]) -> list[list[str]]:
    """Kahn layering: each layer only depends on earlier layers.

    Inside a layer, nodes keep the insertion order of ``deps``. Raises
    CycleError (naming one cycle) or UnknownDependencyError.
    """
    _check_known(deps)
    remaining = {node: set(parents) for node, parents in deps.items()}
    result: list[list[str]] = []
    while remaining:
        ready = [node for node, parents in remaining.items() if not parents]
        if not ready:
            sub = {node: deps[node] for node in remaining}
            raise CycleError(find_cycle(sub) or list(remaining))
        result.append(ready)
        for node in ready:
            del remaining[node]
        done = set(ready)
        for parents in remaining.values():
            parents -= done
    return result


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
