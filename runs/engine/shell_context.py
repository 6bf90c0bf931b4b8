"""Where a reference sits in a bash script, so a value can reach it as data, never as code.

A small lexer of bash's quoting and expansion contexts: command text, "double quotes",
'single quotes' and $'...', heredocs (quoted or not), $( ) and backticks, ${ }, arithmetic
($(( )), (( )), $[ ], let, declare -i, [[ x -eq y ]]), array subscripts, eval and
``sh -c``. Values always travel in the environment; the context decides how the reference
to that environment variable is written, or that no safe writing exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import Enum

__all__ = [
    "SAFE",
    "Context",
    "explain",
    "classify",
    "reference_spans",
    "shell_problems",
    "unsafe_references",
]


class Context(Enum):
    BARE = "bare"
    DQUOTE = "double quotes"
    HEREDOC = "an unquoted heredoc"
    COMMENT = "a comment"
    SQUOTE = "single quotes"
    QHEREDOC = "a quoted heredoc"
    ESCAPED = "an escaped reference"
    ARITH = "arithmetic"
    SUBSCRIPT = "an array subscript"
    EVAL = "text run as code (eval, sh -c)"


SAFE = frozenset({Context.BARE, Context.DQUOTE, Context.HEREDOC, Context.COMMENT})

SUGGESTIONS = {
    Context.SQUOTE: "single quotes keep text literal; write the reference bare or inside "
    "double quotes",
    Context.QHEREDOC: "a quoted heredoc (<<'EOF') keeps its text literal; use an unquoted "
    "heredoc (<<EOF) to include the value",
    Context.ESCAPED: "remove the backslash, or write the text without '$'",
    Context.ARITH: "bash evaluates arithmetic operands as code (a[$(cmd)]); copy the value to "
    'a variable and check it first: n=$REF; [[ "$n" =~ ^[0-9]+$ ]] && (( n + 1 ))',
    Context.SUBSCRIPT: "array subscripts are arithmetic; use an associative array "
    '(declare -A) with a quoted key: k=$REF; echo "${map[$k]}" after checking k',
    Context.EVAL: "a value must not become script text; pass it as an argument or variable "
    "instead of through eval / sh -c",
}

# Every reference form variables.py recognises, whatever the recipe's nodes and inputs are:
# validation runs without a run's context.
REFERENCE_RE = re.compile(
    r"\$(?:LOOP_PREV\.[A-Za-z0-9_-]+\.output(?:\.[A-Za-z_]\w*)?"
    r"|INPUTS\.[A-Za-z_]\w*"
    r"|[A-Za-z0-9_-]+\.output(?:\.[A-Za-z_]\w*)?"
    r"|(?:ARGUMENTS|USER_MESSAGE|ARTIFACTS_DIR|BASE_BRANCH|DOCS_DIR|WORKFLOW_ID"
    r"|LOOP_USER_INPUT|LOOP_PREV_OUTPUT))(?![A-Za-z0-9_])"
)

_WORD_BREAK = " \t\n;&|(){}<>"
_PREFIX_WORDS = {"!", "time", "then", "do", "else", "elif", "if", "while", "until", "{"}
_PREFIX_WORDS |= {"exec", "command", "builtin", "nohup", "env"}
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "/bin/sh", "/bin/bash", "/usr/bin/env"}
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*(\[[^\]]*\])?\+?=")
_ARITH_TEST = re.compile(r"\s-(eq|ne|lt|le|gt|ge)\s")
_SUBSCRIPT_START = re.compile(r"[A-Za-z_]\w*\[")


@dataclass
class _Frame:
    kind: str  # cmd, dq, sq, ansi, bt, param, arith, subscript, heredoc
    start: int = 0  # cmd: start of the current simple command
    depth: int = 0  # cmd/arith: open parentheses; arith: how it ends
    closer: str = ""
    test_start: int | None = None  # cmd: position of an open [[
    end: int = 0  # heredoc: where the body ends
    after: int = 0  # heredoc: position after the delimiter line


def reference_spans(script: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in REFERENCE_RE.finditer(script)]


def explain(ref: str, context: Context) -> str:
    """Why a reference in ``context`` is refused and what to write instead."""
    return f"{ref} is inside {context.value}, where no substitution is safe: " + SUGGESTIONS[
        context
    ].replace("$REF", ref)


def unsafe_references(script: str) -> list[tuple[int, str, Context, str]]:
    """(line, reference, context, suggestion) for every reference no rewrite can make safe."""
    spans = reference_spans(script)
    found = classify(script, {start for start, _ in spans})
    problems = []
    for start, end in spans:
        context = found[start]
        if context not in SAFE:
            line = script.count("\n", 0, start) + 1
            problems.append((line, script[start:end], context, explain(script[start:end], context)))
    return problems


def shell_problems(lines, path: str, script: str, label: str) -> list:
    """Load-time problems (recipes.problems.Problem) for a script at ``path``: the line is
    the script's own line as the YAML file shows it (block scalars start one line below)."""
    found = []
    for line, _ref, _context, explanation in unsafe_references(script):
        problem = lines.problem(path, f"{label}, line {line} of the script: {explanation}")
        if problem.line is not None and "\n" in script.rstrip("\n"):
            problem = replace(problem, line=problem.line + line)
        found.append(problem)
    return found


def _command_context(script: str, frame: _Frame, pos: int) -> Context | None:
    """eval / let / sh -c / declare -i / [[ -eq ]] around ``pos`` in a command frame."""
    if frame.test_start is not None:
        close = script.find("]]", pos)
        clause = script[frame.test_start : close if close >= 0 else len(script)]
        if _ARITH_TEST.search(clause + " "):
            return Context.ARITH
    words = script[frame.start : pos].split()
    while words and (words[0] in _PREFIX_WORDS or _ASSIGNMENT.match(words[0])):
        words.pop(0)
    if not words:
        return None
    first = words[0]
    if first == "eval":
        return Context.EVAL
    if first == "let":
        return Context.ARITH
    if first in _SHELLS and "-c" in words:
        return Context.EVAL
    if first in ("declare", "local", "typeset", "readonly", "export"):
        if any(w.startswith("-") and "i" in w for w in words[1:]):
            return Context.ARITH
    return None


def _context_of(script: str, stack: list[_Frame], pos: int) -> Context:
    for frame in reversed(stack):
        if frame.kind == "arith":
            return Context.ARITH
        if frame.kind == "subscript":
            return Context.SUBSCRIPT
        if frame.kind in ("cmd", "bt"):
            found = _command_context(script, frame, pos)
            if found:
                return found
    for frame in reversed(stack):
        if frame.kind in ("sq", "ansi"):
            return Context.SQUOTE
        if frame.kind == "dq":
            return Context.DQUOTE
        if frame.kind == "heredoc":
            return Context.HEREDOC
        if frame.kind in ("cmd", "bt"):
            return Context.BARE
    return Context.BARE


def _heredoc_word(script: str, i: int) -> tuple[str, bool, bool, int]:
    """Parse the word after ``<<`` at ``i``: (delimiter, quoted, strip_tabs, next index)."""
    strip = script.startswith("-", i)
    i += 1 if strip else 0
    while i < len(script) and script[i] in " \t":
        i += 1
    j = i
    while j < len(script) and script[j] not in " \t\n;&|<>()":
        j += 1
    word = script[i:j]
    quoted = any(c in word for c in "'\"\\")
    return re.sub(r"['\"\\]", "", word), quoted, strip, j


def _heredoc_end(script: str, start: int, delim: str, strip: bool) -> tuple[int, int]:
    """(end of body, index after the delimiter line) for a body starting at ``start``."""
    pos = start
    while pos <= len(script):
        nl = script.find("\n", pos)
        line_end = len(script) if nl < 0 else nl
        line = script[pos:line_end]
        if (line.lstrip("\t") if strip else line) == delim:
            return pos, line_end + 1
        if nl < 0:
            break
        pos = nl + 1
    return len(script), len(script)


def classify(script: str, wanted: set[int]) -> dict[int, Context]:
    """Context of each position in ``wanted`` (positions of ``$`` starting a reference)."""
    result: dict[int, Context] = {}
    stack = [_Frame("cmd")]
    pending: list[tuple[str, bool, bool]] = []
    n = len(script)
    i = 0

    def mark(lo: int, hi: int, context: Context) -> None:
        for pos in wanted:
            if lo <= pos < hi:
                result.setdefault(pos, context)

    def open_heredocs(body_start: int) -> int:
        """Push the first pending heredoc body; quoted bodies are skipped at once."""
        while pending:
            delim, quoted, strip = pending.pop(0)
            end, after = _heredoc_end(script, body_start, delim, strip)
            if quoted:
                mark(body_start, end, Context.QHEREDOC)
                body_start = after
                continue
            stack.append(_Frame("heredoc", end=end, after=after))
            return body_start
        return body_start

    while i < n:
        frame = stack[-1]
        c = script[i]
        if frame.kind == "heredoc" and i >= frame.end:
            stack.pop()
            i = open_heredocs(frame.after)
            continue
        if c == "$" and i in wanted:
            result[i] = _context_of(script, stack, i)
            i += 1
            continue
        kind = frame.kind
        if kind == "sq":
            if c == "'":
                stack.pop()
            i += 1
            continue
        if kind == "ansi":
            if c == "\\":
                i += 2
                continue
            if c == "'":
                stack.pop()
            i += 1
            continue
        if c == "\\":
            if i + 1 in wanted:
                result[i + 1] = Context.ESCAPED
            i += 2
            continue
        if c == "$":
            if script.startswith("$((", i):
                stack.append(_Frame("arith", closer="))"))
                i += 3
                continue
            if script.startswith("$(", i):
                stack.append(_Frame("cmd", start=i + 2, closer=")"))
                i += 2
                continue
            if script.startswith("$[", i):
                stack.append(_Frame("arith", closer="]"))
                i += 2
                continue
            if script.startswith("${", i):
                stack.append(_Frame("param"))
                m = re.compile(r"[#!]?[A-Za-z_]\w*\[").match(script, i + 2)
                if m:
                    stack.append(_Frame("subscript"))
                    i = m.end()
                    continue
                i += 2
                continue
            if script.startswith("$'", i) and kind in ("cmd", "param", "bt"):
                stack.append(_Frame("ansi"))
                i += 2
                continue
            i += 1
            continue
        if c == "`":
            if kind == "bt":
                stack.pop()
            else:
                stack.append(_Frame("bt", start=i + 1))
            i += 1
            continue
        if kind in ("dq", "heredoc"):
            if c == '"' and kind == "dq":
                stack.pop()
            i += 1
            continue
        if kind == "param":
            if c == "}":
                stack.pop()
            elif c == '"':
                stack.append(_Frame("dq"))
            elif c == "'" and not any(f.kind == "dq" for f in stack):
                stack.append(_Frame("sq"))
            i += 1
            continue
        if kind == "arith":
            if c == "(":
                frame.depth += 1
            elif c == ")" and frame.depth:
                frame.depth -= 1
            elif script.startswith(frame.closer, i):
                stack.pop()
                i += len(frame.closer)
                continue
            i += 1
            continue
        if kind == "subscript":
            if c == "]":
                stack.pop()
            i += 1
            continue
        # command text: cmd frames ($( ) and the script itself) and backticks
        word_start = i == 0 or script[i - 1] in _WORD_BREAK
        if c == "'":
            stack.append(_Frame("sq"))
        elif c == '"':
            stack.append(_Frame("dq"))
        elif c == "#" and word_start:
            nl = script.find("\n", i)
            nl = n if nl < 0 else nl
            mark(i, nl, Context.COMMENT)
            i = nl
            continue
        elif c == "\n":
            frame.start, frame.test_start = i + 1, None
            if pending:
                i = open_heredocs(i + 1)
                continue
        elif script.startswith("<<", i) and not script.startswith("<<<", i):
            delim, quoted, strip, i = _heredoc_word(script, i + 2)
            pending.append((delim, quoted, strip))
            continue
        elif word_start and script.startswith("[[", i):
            frame.test_start = i
            i += 2
            continue
        elif word_start and script.startswith("]]", i):
            frame.test_start = None
            i += 2
            continue
        elif word_start and script.startswith("((", i):
            stack.append(_Frame("arith", closer="))"))
            i += 2
            continue
        elif word_start and (m := _SUBSCRIPT_START.match(script, i)):
            stack.append(_Frame("subscript"))
            i = m.end()
            continue
        elif c == "(":
            frame.depth += 1
            frame.start = i + 1
        elif c == ")":
            if frame.depth:
                frame.depth -= 1
            elif frame.closer == ")" and len(stack) > 1:
                stack.pop()
                i += 1
                continue
            frame.start = i + 1
        elif c in ";&|":
            frame.start = i + 1
        i += 1
    for pos in wanted:
        result.setdefault(pos, Context.BARE)
    return result
