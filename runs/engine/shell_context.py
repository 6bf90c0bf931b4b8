"""Where a value stands in a bash script, so it can reach it as data, never as code.

Values always travel in the environment. Before a script runs (and when a recipe is
validated) each console reference (``$USER_MESSAGE``, ``$node.output``, ...) is replaced
by the variable that will carry it, ``${LOOP_V_n}``, and the script is parsed with
tree-sitter's bash grammar (``runs.engine.shell_tree``). Each placeholder's place in the
tree decides how it is written (bare -> ``"${LOOP_V_n}"``, in double quotes or an unquoted
heredoc -> ``${LOOP_V_n}``) or that no safe writing exists (``runs.engine.shell_rules``).

The same walk looks at every other spelling of a value-carrying variable the console
exports (``runs.engine.shell_names``: ``${USER_MESSAGE}``, ``(( ARGUMENTS ))``,
``eval "$LOOP_V_1"``, ...) and at script variables a value was copied into
(``x=$USER_MESSAGE; (( x ))``): those are refused in unsafe places as well.

The checker is a lint that catches the ways a script author turns a value into code by
mistake; the boundary against a hostile value is the OS sandbox the process runs in. Besides
refusals it gives warnings (``runs.engine.shell_warnings``): a value that could pose as an
option, and a value written to a file that the script later runs.
"""

from __future__ import annotations

import re
from dataclasses import replace

from .shell_analysis import Analysis, expanded_in
from .shell_kinds import SAFE, Context, Finding, Notice, explain
from .shell_names import value_name_pattern
from .shell_warnings import option_notices, written_then_run

__all__ = [
    "SAFE",
    "Context",
    "Finding",
    "Notice",
    "check_script",
    "explain",
    "plan",
    "reference_spans",
    "shell_report",
    "unsafe_references",
]

# Every reference form variables.py recognises, whatever the recipe's nodes and inputs are:
# validation runs without a run's context.
REFERENCE_RE = re.compile(
    r"\$(?:LOOP_PREV\.[A-Za-z0-9_-]+\.output(?:\.[A-Za-z_]\w*)?"
    r"|INPUTS\.[A-Za-z_]\w*"
    r"|[A-Za-z0-9_-]+\.output(?:\.[A-Za-z_]\w*)?"
    r"|(?:ARGUMENTS|USER_MESSAGE|ARTIFACTS_DIR|BASE_BRANCH|DOCS_DIR|WORKFLOW_ID"
    r"|LOOP_USER_INPUT|LOOP_PREV_OUTPUT))(?![A-Za-z0-9_])"
)


def reference_spans(script: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in REFERENCE_RE.finditer(script)]


def _without_values(script: str, spans) -> bool:
    return not spans and not value_name_pattern().search(script)


def plan(script: str, spans) -> tuple[list[Context], list[Finding]]:
    """The context of each console reference at ``spans`` (in order), and the unsafe uses
    of value-carrying variables written any other way."""
    if _without_values(script, spans):
        return [], []
    return Analysis(script, spans, positional=False, depth=0).run()


def check_script(script: str) -> tuple[list[Finding], list[Notice]]:
    """Every place in ``script`` where a value would become code (refused), and the places
    worth a warning, each with its line."""
    spans = reference_spans(script)
    if _without_values(script, spans):
        return [], []
    analysis = Analysis(script, spans, positional=False, depth=0)
    contexts, findings = analysis.run()
    found = []
    for (start, end), context in zip(spans, contexts, strict=True):
        if context not in SAFE:
            line = script.count("\n", 0, start) + 1
            where = analysis.near() if context is Context.UNPARSED else ""
            found.append(Finding(line, script[start:end], context, where))
    notices: list[Notice] = []
    if analysis.error is None:
        notices += option_notices(expanded_in(analysis), analysis.source, analysis.info.lines)
        notices += written_then_run(analysis.root, analysis.positions, analysis.line)
    refused = {f.line for f in found + findings}  # a refusal says more than a warning
    notices = [n for n in notices if n.line not in refused]
    return sorted(found + findings, key=lambda f: f.line), sorted(notices, key=lambda n: n.line)


def unsafe_references(script: str) -> list[Finding]:
    """Every place in ``script`` where a value would become code, with its line."""
    return check_script(script)[0]


def shell_report(
    lines, path: str, script: str, label: str, *, start_checks: bool = False
) -> tuple[list, list]:
    """Load-time (errors, warnings) as recipes.problems.Problem for a script at ``path``:
    the line is the script's own line as the YAML file shows it (block scalars start one
    line below). ``start_checks``: places a bash step checks when it starts are not errors
    (runs.engine.shell_checks)."""
    findings, notices = check_script(script)
    if start_checks and findings:
        from .shell_checks import checked_at_start

        findings = checked_at_start(script)[1]

    def problem(item) -> object:
        message = f"{label}, line {item.line} of the script: {item.explanation}"
        found = lines.problem(path, message)
        if found.line is not None and lines.is_block(path):
            found = replace(found, line=found.line + item.line)
        return found

    return [problem(f) for f in findings], [problem(n) for n in notices]
