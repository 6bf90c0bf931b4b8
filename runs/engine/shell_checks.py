"""Values checked when a bash step starts, where no safe rewrite exists.

Bash arithmetic (`$(( n + 1 ))`, `(( n > 2 ))`, `[[ $n -gt 2 ]]`) and an interpreter's
program text (`python3 -c "print($count.output * 2)"`) run what they are given: a value
there is code, and no quoting changes that. A peer's workflow puts a count there, though,
and a count is safe anywhere: digits are never code. So when a workflow loads, each such
place that a console reference reaches (directly, or through a script variable assigned
from it: `n=$count.output`) becomes a check kept on the node, and the place is not refused.
When the step starts, each checked value is known; one that is not an integer fails the
step before anything runs, with an error naming the value's source, the line and the place
(runs.engine.variables.substitute_shell). Any other spelling stays refused.
"""

from __future__ import annotations

import re

from .shell_context import REFERENCE_RE, check_script
from .shell_kinds import Context, Finding

__all__ = ["INTEGER", "checked_at_start", "describe_source", "waived"]

INTEGER = re.compile(r"-?[0-9]+")
CHECKED = (Context.ARITH, Context.PROGRAM)
_VARIABLE = re.compile(r"^\$?\{?([A-Za-z_][A-Za-z0-9_]*)\}?$")


def checked_at_start(script: str) -> tuple[list[dict], list[Finding]]:
    """(the checks a step makes when it starts, the findings that stay refused)."""
    findings, _ = check_script(script)
    checks: list[dict] = []
    refused: list[Finding] = []
    lines = script.split("\n")
    for finding in findings:
        if finding.context not in CHECKED:
            refused.append(finding)
            continue
        place = "bash arithmetic" if finding.context is Context.ARITH else "a program's text"
        if REFERENCE_RE.fullmatch(finding.text):
            checks.append({"ref": finding.text, "line": finding.line, "via": "", "place": place})
            continue
        variable = _VARIABLE.match(finding.text)
        refs = _assigned(lines[: finding.line], variable.group(1)) if variable else []
        if not refs:
            refused.append(finding)
            continue
        checks += [
            {"ref": ref, "line": finding.line, "via": finding.text, "place": place} for ref in refs
        ]
    return checks, refused


def _assigned(lines: list[str], name: str) -> list[str]:
    """The references assigned to `name` (`name=...`, `export name=...`) in `lines`."""
    assignment = re.compile(rf"(?:^|[\s;&|(]){re.escape(name)}\+?=(\S*)")
    found: list[str] = []
    for line in lines:
        for match in assignment.finditer(line):
            found += [m.group(0) for m in REFERENCE_RE.finditer(match.group(1))]
    return list(dict.fromkeys(found))


def waived(checks: list[dict], line: int, text: str) -> bool:
    """Whether a refusal at `line` of `text` is one a passed start check covers."""
    return any(c["line"] == line and (c["via"] or c["ref"]) == text for c in checks)


def describe_source(ref: str) -> str:
    """`$count.output` -> "the output of node 'count'", for a step's error."""
    name = ref[1:]
    if name.startswith("INPUTS."):
        return f"the input '{name.split('.', 1)[1]}'"
    if name.startswith("LOOP_PREV."):
        return f"the previous pass's output of node '{name.split('.')[1]}'"
    if ".output" in name:
        node, _, rest = name.partition(".output")
        field = f" (field '{rest[1:]}')" if rest else ""
        return f"the output of node '{node}'{field}"
    return {
        "ARGUMENTS": "the run's message",
        "USER_MESSAGE": "the run's message",
        "LOOP_USER_INPUT": "the feedback given at the gate",
        "LOOP_PREV_OUTPUT": "the previous iteration's output",
    }.get(name, f"${name}")
