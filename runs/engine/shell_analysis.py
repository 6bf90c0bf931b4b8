"""One pass of the shell checker over a script (`runs.engine.shell_context` is its API).

Console references are replaced by placeholders (``${LOOP_V_n}``), the script is parsed, and
each placeholder and each spelling of a value-carrying variable (or of a script variable a
value was copied into) is placed by walking up its syntax tree (`runs.engine.shell_rules`).
Copies are found while walking (and `getopts`, `for x; do` copy positional parameters once
those may hold a value), so the walk repeats until no new copy appears.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import replace
from functools import lru_cache

from .shell_commands import command_line, getopts_parts
from .shell_kinds import Context, Finding
from .shell_names import is_value_name, value_name_pattern
from .shell_rules import (
    EXPANSIONS,
    HEREDOC_PARTS,
    ScriptInfo,
    collect_aliases,
    collect_declarations,
    collect_readers,
    context_of,
    declaration_flags,
    declared_name,
    feeds_code,
)
from .shell_tree import Node, first_error, parse, query, static_text, text

__all__ = ["Analysis", "CONSOLE_MADE"]

# The console's own paths and ids may name the program to run ($ARTIFACTS_DIR/run.sh).
CONSOLE_MADE = {"$ARTIFACTS_DIR", "$DOCS_DIR", "$WORKFLOW_ID"}
# Unsafe places for a name written as plain text (not expanded): it is evaluated there.
TEXT_DANGERS = {
    Context.ARITH,
    Context.SUBSCRIPT,
    Context.EVAL,
    Context.RUNNER,
    Context.RUN_OPTION,
}
POSITIONAL = re.compile(rb"\$\{?[1-9@*]")
# BASH_ENV or ENV set anywhere (a prefix, export, env NAME=...): a shell may load its stdin.
STARTUP_ENV = re.compile(
    rb"(?<![A-Za-z0-9_$])(?:BASH_ENV|ENV)\+?=|\bexport\b[^\n;]*\b(?:BASH_)?ENV\b"
)
# A file that is an open descriptor: what a redirect of `exec` left there may be run.
FD_PATHS = re.compile(rb"/dev/fd/|/proc/[^\s/]+/fd/|/dev/stdin")
HEREDOC_PREFIX = b': "'
MAX_ROUNDS = 8
MAX_NESTING = 3


@lru_cache(maxsize=64)
def _binary(pattern: str) -> re.Pattern:
    return re.compile(pattern.encode())


def _with_placeholders(script: str, spans) -> tuple[bytes, list[tuple[int, int]]]:
    parts: list[bytes] = []
    places: list[tuple[int, int]] = []
    pos, size = 0, 0
    for number, (start, end) in enumerate(spans, start=1):
        before = script[pos:start].encode()
        placeholder = f"${{LOOP_V_{number}}}".encode()
        parts += [before, placeholder]
        size += len(before)
        places.append((size, size + len(placeholder)))
        size += len(placeholder)
        pos = end
    parts.append(script[pos:].encode())
    return b"".join(parts), places


def _literal_context(node: Node, start: int, source: bytes) -> Context:
    """A placeholder bash would not expand: why."""
    probe: Node | None = node
    while probe is not None:
        if probe.type == "comment":
            return Context.COMMENT
        if probe.type in ("raw_string", "ansi_c_string"):
            return Context.SQUOTE
        if probe.type == "heredoc_body":
            return Context.QHEREDOC
        probe = probe.parent
    if start and source[start - 1 : start] == b"\\":
        return Context.ESCAPED
    return Context.UNPARSED


def _heredoc_bodies(root: Node, source: bytes) -> list[tuple[int, int, bool, Node]]:
    """(start, end, quoted, body node) of each heredoc body, from the start of its line."""
    found = []
    for redirect in query(root, "(heredoc_redirect) @h"):
        parts = {child.type: child for child in redirect.children}
        body, opener = parts.get("heredoc_body"), parts.get("heredoc_start")
        if body is None or opener is None:
            continue
        quoted = any(mark in text(opener) for mark in "'\"\\")
        low = source.rfind(b"\n", 0, body.start_byte) + 1
        below = source.find(b"\n", opener.end_byte) + 1
        if below and any(  # the grammar read body lines as arguments (a line starting `\$`)
            c.start_byte >= below and c.type not in HEREDOC_PARTS for c in redirect.children
        ):
            low = below
        closer = parts.get("heredoc_end")
        found.append((low, closer.start_byte if closer else body.end_byte, quoted, body))
    return found


def _is_subject(node: Node) -> bool:
    """`X` of `$X`, `${X}`, `${!X}`, `${X:-...}`: the variable expanded, not an operand."""
    parent = node.parent
    if node.type not in ("variable_name", "special_variable_name") or parent is None:
        return False
    if parent.type == "simple_expansion":
        return True
    return parent.type == "expansion" and parent.named_children[:1] == [node]


def positional_readers(root: Node, lines: dict) -> list[tuple[Node, set[str]]]:
    """Where the script reads the positional parameters without spelling them, and the
    variables filled there: `getopts OPTS NAME` with no ARGS, `for NAME; do` and
    `select NAME; do` (no `in`: they walk "$@")."""
    found = []
    for command in query(root, "(command) @c"):
        line = command_line(command, lines)
        getopts = getopts_parts(line)
        if getopts is not None and getopts[0] >= len(line.words):
            found.append((command, getopts[1]))
    for loop in query(root, "(for_statement) @f"):
        variable = loop.child_by_field_name("variable")
        if variable is not None and loop.child_by_field_name("value") is None:
            found.append((loop, {text(variable)}))
    return found


class Analysis:
    def __init__(self, script: str, spans, *, positional: bool, depth: int):
        self.script, self.spans, self.depth = script, list(spans), depth
        self.source, self.places = _with_placeholders(script, self.spans)
        self.root = parse(self.source)
        self.error = first_error(self.root)
        self.info = ScriptInfo(
            positional_values=positional,
            shell_args_unsafe=self.inner_unsafe,
            startup_env=bool(STARTUP_ENV.search(self.source)),
        )
        collect_declarations(
            query(self.root, "(declaration_command) @d"),
            query(self.root, "(function_definition) @f"),
            self.info,
        )
        commands = query(self.root, "(command) @c")
        collect_readers(commands, self.info)
        if b"expand_aliases" in self.source:
            self.info.aliases = collect_aliases(commands)
        self.info.stdin_runs_later = bool(FD_PATHS.search(self.source)) or feeds_code(
            self.root, self.info
        )
        self.assignments = query(self.root, "(variable_assignment) @a")
        self.readers = positional_readers(self.root, self.info.lines)
        self.heredocs = sorted(_heredoc_bodies(self.root, self.source), key=lambda h: h[0])
        self._heredoc_starts = [low for low, _, _, _ in self.heredocs]
        self._place_starts = [start for start, _ in self.places]
        self._newlines = [m.start() for m in re.finditer(rb"\n", self.source)]
        self._inner: dict[int, tuple[Node, bytes]] = {}
        self.expanded: list[tuple[int, Node, str]] = []  # (line, occurrence, as written)
        self.positions: list[int] = []  # where a value or a value name stands

    def line(self, byte: int) -> int:
        return bisect.bisect_left(self._newlines, byte) + 1

    def _in_place(self, byte: int) -> bool:
        """Whether `byte` is inside a placeholder (places are sorted and disjoint)."""
        at = bisect.bisect_right(self._place_starts, byte) - 1
        return at >= 0 and byte < self.places[at][1]

    def _state(self):
        info = self.info
        return (
            frozenset(info.copies),
            frozenset(info.indirect),
            frozenset(info.called_with_values),
            info.positional_values,
        )

    def run(self) -> tuple[list[Context], list[Finding]]:
        for _ in range(MAX_ROUNDS):
            seen = self._state()
            self.note_indirect()
            self.note_positional_readers()
            contexts, findings = self.round()
            if self._state() == seen:
                break
        return contexts, findings

    def note_indirect(self) -> None:
        """`n=USER_MESSAGE` makes `${!n}` the value; `declare -n r=USER_MESSAGE` makes `$r`
        the value."""
        for assignment in self.assignments:
            value = assignment.child_by_field_name("value")
            target = static_text(value) if value is not None else None
            if not target or not (is_value_name(target) or target in self.info.copies):
                continue
            owner = assignment.parent
            nameref = owner is not None and owner.type == "declaration_command"
            if nameref and "n" in declaration_flags(owner):
                self.info.copies.add(declared_name(assignment))
            else:
                self.info.indirect.add(declared_name(assignment))

    def note_positional_readers(self) -> None:
        """`getopts`, `for x; do`: where the positional parameters may hold a value (`set --
        "$USER_MESSAGE"`, a function called with one), the variables they fill hold its text."""
        info = self.info
        if not self.readers or not (info.positional_values or info.called_with_values):
            return
        bodies = self.function_bodies()
        for node, filled in self.readers:
            if info.positional_values or any(s <= node.start_byte < e for s, e in bodies):
                info.copies |= filled

    def round(self) -> tuple[list[Context], list[Finding]]:
        self.expanded, self.positions = [], [s for s, _ in self.places]
        contexts = [self.reference_context(i, s, e) for i, (s, e) in enumerate(self.places)]
        findings = []
        for start, end in self.candidates():
            self.positions.append(start)
            finding = self.variable_finding(start, end)
            if finding is not None:
                findings.append(finding)
        return contexts, findings

    def locate(self, start: int, end: int):
        """(tree root, its source, start, end, the heredoc's own danger) for a position.

        tree-sitter's grammar reads unquoted heredoc bodies poorly (a line starting with
        blanks, `$(( ))`): such a body is read again the way bash reads it, as the text
        of a double-quoted string."""
        index = bisect.bisect_right(self._heredoc_starts, start) - 1
        if index >= 0 and start < self.heredocs[index][1]:
            low, _, quoted, body = self.heredocs[index]
            _, outer = context_of(body, self._scratch())
            if quoted:
                return None, None, start, end, outer
            root, source = self.inner_heredoc(index)
            shift = len(HEREDOC_PREFIX) - low
            return root, source, start + shift, end + shift, outer
        return self.root, self.source, start, end, None

    def inner_heredoc(self, index: int):
        if index not in self._inner:
            low, high, _, _ = self.heredocs[index]
            source = HEREDOC_PREFIX + self.source[low:high].replace(b'"', b"'") + b'"'
            self._inner[index] = (parse(source), source)
        return self._inner[index]

    def reference_context(self, index: int, start: int, end: int) -> Context:
        if self.error is not None:
            return Context.UNPARSED
        root, source, start, end, outer = self.locate(start, end)
        if root is None:  # a quoted heredoc
            return outer if outer in TEXT_DANGERS else Context.QHEREDOC
        if first_error(root) is not None:
            return Context.UNPARSED
        node = root.descendant_for_byte_range(start, end)
        # (in a string tree-sitter lets an expansion node begin at the blanks before it)
        if (
            node is not None
            and node.type == "expansion"
            and node.end_byte == end
            and not source[node.start_byte : start].strip()
        ):
            quoting, danger = context_of(node, self.info)
            ref = self.script[self.spans[index][0] : self.spans[index][1]]
            if danger is Context.COMMAND and ref in CONSOLE_MADE:
                danger = None
            if root is not self.root and quoting is Context.DQUOTE:
                quoting = Context.HEREDOC
            if root is self.root and ref not in CONSOLE_MADE:
                self.expanded.append((self.line(start), node, ref))
            return danger or outer or quoting
        literal = _literal_context(node, start, source) if node else Context.UNPARSED
        _, danger = context_of(node, self._scratch()) if node else (None, None)
        if literal is Context.COMMENT:
            return literal
        danger = danger or outer
        return danger if danger in TEXT_DANGERS else literal

    def _scratch(self) -> ScriptInfo:
        """What a mere mention of a name may not record: it copies no value anywhere."""
        return replace(self.info, copies=set(self.info.copies), called_with_values=set())

    def candidates(self):
        names = value_name_pattern(frozenset(self.info.copies | self.info.indirect))
        pattern = _binary(names.pattern)
        for match in pattern.finditer(self.source):
            if not self._in_place(match.start()):
                yield match.start(), match.end()
        if self.info.positional_values or self.info.called_with_values:
            bodies = self.function_bodies()
            for match in POSITIONAL.finditer(self.source):
                if self.info.positional_values or any(s <= match.start() < e for s, e in bodies):
                    yield match.end() - 1, match.end()

    def function_bodies(self) -> list[tuple[int, int]]:
        found = []
        for node in query(self.root, "(function_definition) @f"):
            name = node.child_by_field_name("name")
            if name is not None and text(name) in self.info.called_with_values:
                found.append((node.start_byte, node.end_byte))
        return found

    def variable_finding(self, start: int, end: int) -> Finding | None:
        line, name = self.line(start), self._name(start, end)
        root, source, start, end, outer = self.locate(start, end)
        node = root.descendant_for_byte_range(start, end) if root is not None else None
        if self.error is not None or (root is not None and first_error(root) is not None):
            if node is not None and self._in_comment(node):
                return None
            return Finding(line, name, Context.UNPARSED, self.near())
        if node is None:  # in a quoted heredoc: text, unless the heredoc is run as code
            return Finding(line, name, outer) if outer in TEXT_DANGERS else None
        if _is_subject(node):
            occ = node.parent
            if root is self.root:
                self.expanded.append((line, occ, text(occ)))
            _, danger = context_of(occ, self.info)
            danger = danger or outer
            if danger is not None:
                return Finding(line, text(occ), danger)
            return None
        if self._in_comment(node):
            return None
        _, danger = context_of(node, self._scratch())
        danger = danger or outer
        if danger in TEXT_DANGERS:
            return Finding(line, name, danger)
        return None

    def _name(self, start: int, end: int) -> str:
        return self.source[start:end].decode("utf-8", "replace")

    @staticmethod
    def _in_comment(node: Node) -> bool:
        probe = node
        while probe is not None:
            if probe.type == "comment":
                return True
            probe = probe.parent
        return False

    def near(self) -> str:
        if self.error is None:
            return ""
        return f"the script stops parsing as bash at line {self.line(self.error.start_byte)}"

    def inner_unsafe(self, code: str | None) -> bool:
        """`sh -c CODE NAME ARGS...` given values as ARGS: is CODE careful with $1...?"""
        if code is None or self.depth >= MAX_NESTING:
            return True
        _, findings = Analysis(code, [], positional=True, depth=self.depth + 1).run()
        return bool(findings)


def expanded_in(analysis: Analysis) -> list[tuple[int, Node, str]]:
    """Values expanded in the script's own tree, after the last round (for warnings)."""
    return [item for item in analysis.expanded if item[1].type in EXPANSIONS]
