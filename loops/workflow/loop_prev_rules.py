"""`$LOOP_PREV` references as the workflow design defines them, checked at load.

A loop_group body node reads a sibling's output of the previous iteration as
`$LOOP_PREV.<node>.output`, and one field of a structured output as
`$LOOP_PREV.<node>.output.<field>` (runs.engine.variables). The design defines nothing
else: no history (`[N]`: only the previous iteration is reachable) and no deeper path.
Substitution passes any other text through as it is, so a prompt would get `red[1]` or
`$LOOP_PREV.t.outputs` literally: each such reference is refused here, at its line.
"""

from __future__ import annotations

import re
from dataclasses import replace

from recipes.formats.rule_context import RuleContext, cap
from recipes.problems import child_path

_PREFIX = re.compile(r"\$LOOP_PREV\.")
# What the reference's author wrote, for the message: the name and what sticks to it.
_WRITTEN = re.compile(r"\$LOOP_PREV\.[A-Za-z0-9_.\[\]-]*")
_DEFINED = re.compile(
    r"\$LOOP_PREV\.(?P<node>[A-Za-z0-9_-]+)\.output(?:\.(?P<field>[A-Za-z_][A-Za-z0-9_]*))?"
    r"(?![A-Za-z0-9_])"
)
_INDEX = re.compile(r"\[|\.[0-9]")
_DEEPER = re.compile(r"\.[A-Za-z_]")


def loop_prev_problem(text: str, start: int) -> str | None:
    """What is wrong with the `$LOOP_PREV.` reference at `start` of `text`, or None."""
    written = _WRITTEN.match(text, start).group(0).rstrip(".")
    found = _DEFINED.match(text, start)
    if found is None:
        return (
            f"{written} is not a reference: $LOOP_PREV reads a body node's previous output "
            "as $LOOP_PREV.<node>.output, or one field of it as $LOOP_PREV.<node>.output.<field>"
        )
    ref, node, field = found.group(0), found.group("node"), found.group("field")
    rest = text[found.end() :]
    if field is None and _INDEX.match(rest):
        return (
            f"{written}: history indexing is not supported; only the previous iteration is "
            f"reachable, as $LOOP_PREV.{node}.output. To look further back, have the node "
            "keep each iteration's result in a file under $ARTIFACTS_DIR and read it there"
        )
    if field is not None and (_INDEX.match(rest) or _DEEPER.match(rest)):
        return (
            f"{written}: $LOOP_PREV reads one field, {ref} (a list or an object arrives as "
            "JSON text); indexing into it or a deeper path is not supported"
        )
    return None


def check_loop_prev_references(node, ctx: RuleContext) -> None:
    """A node rule (loops.workflow.format_rules.NODE_RULES): every `$LOOP_PREV.` in the
    node's text (its prompt, script, `when`, `with`, loop block; a loop_group's body nodes
    are checked as nodes of their own)."""
    for path, text in _texts(node.raw, node.path):
        for hit in _PREFIX.finditer(text):
            message = loop_prev_problem(text, hit.start())
            if message is not None:
                _error_at(ctx, path, text, hit.start(), f"{node.label}: {message}")


def _texts(value, path: str):
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key == "nodes" and path.endswith(".loop_group"):
                continue
            yield from _texts(inner, child_path(path, str(key)))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield from _texts(inner, child_path(path, index))


def _error_at(ctx: RuleContext, path: str, text: str, offset: int, message: str) -> None:
    """The error on the line the reference is on (a block scalar starts below its key)."""
    problem = ctx.lines.problem(path, cap(message))
    if problem.line is not None and ctx.lines.is_block(path):
        problem = replace(problem, line=problem.line + 1 + text.count("\n", 0, offset))
    ctx.errors.append(problem)
