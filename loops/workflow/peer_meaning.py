"""What a peer's (Archon's) workflow means where it pastes a value's text into code, given
safely when the recipe loads (once per recipe version: the loaded spec is cached).

Bash: runs.engine.shell_rewrite. Scripts: runs.engine.script_literals.
"""

from __future__ import annotations

from runs.engine.shell_rewrite import rewrite_literal_references

__all__ = ["with_peer_meaning"]


def with_peer_meaning(raw: dict) -> dict:
    """The node with its bash (and until_bash) rewritten where the peer pastes a value into
    literal text and bash can say the same with the value as data
    (runs.engine.shell_rewrite); every rule then reads the rewritten text."""
    rewritten = dict(raw)
    if isinstance(raw.get("bash"), str):
        rewritten["bash"] = rewrite_literal_references(raw["bash"])
    for block in ("loop", "loop_group"):
        if isinstance(raw.get(block), dict) and isinstance(raw[block].get("until_bash"), str):
            until = rewrite_literal_references(raw[block]["until_bash"])
            rewritten[block] = {**raw[block], "until_bash": until}
    return rewritten
