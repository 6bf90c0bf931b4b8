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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

from .shell_commands import unwrap
from .shell_kinds import SAFE, Context, explain
from .shell_names import value_name_pattern
from .shell_rules import ScriptInfo, collect_declarations, collect_readers, context_of
from .shell_tree import Node, command_words, first_error, parse, query, static_text, text

__all__ = [
    "SAFE",
    "Context",
    "Finding",
    "explain",
    "plan",
    "reference_spans",
    "shell_problems",
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
# The console's own paths and ids may name the program to run ($ARTIFACTS_DIR/run.sh).
CONSOLE_MADE = {"$ARTIFACTS_DIR", "$DOCS_DIR", "$WORKFLOW_ID"}
# Unsafe places for a name written as plain text (not expanded): it is evaluated there.
TEXT_DANGERS = {Context.ARITH, Context.SUBSCRIPT, Context.EVAL}
POSITIONAL = re.compile(rb"\$\{?[1-9@*]")
HEREDOC_PREFIX = b': "'
MAX_ROUNDS = 8
MAX_NESTING = 3


@lru_cache(maxsize=64)
def _binary(pattern: str) -> re.Pattern:
    return re.compile(pattern.encode())


@dataclass(frozen=True)
class Finding:
    line: int
    text: str  # the reference or variable as written
    context: Context
    where: str = ""

    @property
    def explanation(self) -> str:
        return explain(self.text, self.context, where=self.where)


def reference_spans(script: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in REFERENCE_RE.finditer(script)]


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
        closer = parts.get("heredoc_end")
        found.append((low, closer.start_byte if closer else body.end_byte, quoted, body))
    return found


class _Analysis:
    def __init__(self, script: str, spans, *, positional: bool, depth: int):
        self.script, self.spans, self.depth = script, list(spans), depth
        self.source, self.places = _with_placeholders(script, self.spans)
        self.root = parse(self.source)
        self.error = first_error(self.root)
        self.info = ScriptInfo(positional_values=positional, shell_args_unsafe=self.inner_unsafe)
        collect_declarations(
            query(self.root, "(declaration_command) @d"),
            query(self.root, "(function_definition) @f"),
            self.info,
        )
        collect_readers(query(self.root, "(command) @c"), self.info)
        self.heredocs = _heredoc_bodies(self.root, self.source)
        self._inner: dict[int, tuple[Node, bytes]] = {}

    def line(self, byte: int) -> int:
        return self.source.count(b"\n", 0, byte) + 1

    def run(self) -> tuple[list[Context], list[Finding]]:
        for _ in range(MAX_ROUNDS):
            seen = (set(self.info.copies), set(self.info.called_with_values))
            seen += (self.info.positional_values,)
            contexts, findings = self.round()
            now = (self.info.copies, self.info.called_with_values, self.info.positional_values)
            if now == seen:
                break
        return contexts, findings

    def round(self) -> tuple[list[Context], list[Finding]]:
        contexts = [self.reference_context(i, s, e) for i, (s, e) in enumerate(self.places)]
        findings = []
        for start, end in self.candidates():
            finding = self.variable_finding(start, end)
            if finding is not None:
                findings.append(finding)
        return contexts, findings

    def locate(self, start: int, end: int):
        """(tree root, its source, start, end, the heredoc's own danger) for a position.

        tree-sitter's grammar reads unquoted heredoc bodies poorly (a line starting with
        blanks, `$(( ))`): such a body is read again the way bash reads it, as the text
        of a double-quoted string."""
        for index, (low, high, quoted, body) in enumerate(self.heredocs):
            if low <= start < high:
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
        names = value_name_pattern(frozenset(self.info.copies))
        pattern = _binary(names.pattern)
        inside = self.places
        for match in pattern.finditer(self.source):
            if not any(s <= match.start() < e for s, e in inside):
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
        expanded = node.type in ("variable_name", "special_variable_name") and (
            node.parent is not None and node.parent.type in ("simple_expansion", "expansion")
        )
        if expanded:
            occ = node.parent
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

    def inner_unsafe(self, command: Node) -> bool:
        """`sh -c CODE NAME ARGS...` given values as ARGS: is CODE careful with $1...?"""
        words = command_words(command)
        start, _ = unwrap(words)
        code, skip = None, False
        for word in words[start + 1 :]:
            value = static_text(word)
            if skip:
                skip = False
            elif value in ("-o", "+o", "-O", "+O"):
                skip = True
            elif not (value or "").startswith(("-", "+")):
                code = word
                break
        inner = static_text(code) if code is not None else None
        if inner is None or self.depth >= MAX_NESTING:
            return True
        _, findings = _Analysis(inner, [], positional=True, depth=self.depth + 1).run()
        return bool(findings)


def plan(script: str, spans) -> tuple[list[Context], list[Finding]]:
    """The context of each console reference at ``spans`` (in order), and the unsafe uses
    of value-carrying variables written any other way."""
    if not spans and not value_name_pattern().search(script):
        return [], []
    return _Analysis(script, spans, positional=False, depth=0).run()


def unsafe_references(script: str) -> list[Finding]:
    """Every place in ``script`` where a value would become code, with its line."""
    spans = reference_spans(script)
    if not spans and not value_name_pattern().search(script):
        return []
    analysis = _Analysis(script, spans, positional=False, depth=0)
    contexts, findings = analysis.run()
    found = []
    for (start, end), context in zip(spans, contexts, strict=True):
        if context not in SAFE:
            line = script.count("\n", 0, start) + 1
            where = analysis.near() if context is Context.UNPARSED else ""
            found.append(Finding(line, script[start:end], context, where))
    return sorted(found + findings, key=lambda f: f.line)


def shell_problems(lines, path: str, script: str, label: str) -> list:
    """Load-time problems (recipes.problems.Problem) for a script at ``path``: the line is
    the script's own line as the YAML file shows it (block scalars start one line below)."""
    found = []
    for finding in unsafe_references(script):
        message = f"{label}, line {finding.line} of the script: {finding.explanation}"
        problem = lines.problem(path, message)
        if problem.line is not None and lines.is_block(path):
            problem = replace(problem, line=problem.line + finding.line)
        found.append(problem)
    return found
