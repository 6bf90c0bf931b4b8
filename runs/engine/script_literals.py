"""A value reference inside a string literal of a `script:` node's program, given the peer's
meaning ("this text, here") with the value as data.

The peer (Archon) pastes `$ARGUMENTS` or `$node.output` into inline code before it runs, so
`const args = "$ARGUMENTS"` holds the message, and breaks (or runs) when the message holds a
quote. Inside a string literal the same text is an environment read joined to the literal's
pieces, found with a real tokenizer of the script's language, never a regex:

- Python (uv), with the standard `tokenize`: `"abc $X def"` ->
  `("abc " + __import__('os').environ['X'] + " def")`; in an f-string the read is a
  replacement field (`f"n={n} {__import__('os').environ['X']}"`);
- TypeScript / JavaScript (bun), with tree-sitter's TypeScript grammar: `'abc $X'` ->
  `('abc ' + process.env["X"])`; in a template literal, `${process.env["X"]}`.

Outside a string literal (code, a bytes literal, an f-string's expression, after a
backslash) a reference has no safe meaning and stays refused, with what to write instead.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from functools import lru_cache

from .shell_context import REFERENCE_RE

__all__ = ["Refusal", "rewrite_literals"]

_PY_PREFIX = re.compile(r"^([A-Za-z]*)('''|\"\"\"|'|\")")


@dataclass(frozen=True)
class Refusal:
    line: int
    ref: str
    why: str


def rewrite_literals(code: str, runtime: str, env_name) -> tuple[str, list[Refusal]]:
    """(the code with each reference in a string literal read from the environment, the
    references that cannot be). `env_name(ref)` names the variable that carries `ref`."""
    refs = [(m.start(), m.end()) for m in REFERENCE_RE.finditer(code)]
    if not refs:
        return code, []
    find = _python_literals if runtime == "uv" else _script_literals
    literals, problem = find(code)
    if problem is not None:
        return code, [Refusal(_line(code, s), code[s:e], problem) for s, e in refs]
    refusals: list[Refusal] = []
    edits: list[tuple[int, int, str]] = []
    for literal in literals:
        inside = [(s, e) for s, e in refs if literal.start <= s and e <= literal.end]
        if not inside:
            continue
        text, why = literal.rewrite(code, inside, lambda ref, q: _read(runtime, env_name(ref), q))
        if why is not None:
            refusals += [Refusal(_line(code, s), code[s:e], why) for s, e in inside]
        else:
            edits.append((literal.start, literal.end, text))
    covered = [(s, e) for s, e, _ in edits] + [(c.start, c.end) for c in literals]
    for s, e in refs:
        if not any(lo <= s and e <= hi for lo, hi in covered):
            refusals.append(Refusal(_line(code, s), code[s:e], OUTSIDE))
    out, pos = [], 0
    for start, end, text in sorted(edits):
        out += [code[pos:start], text]
        pos = end
    out.append(code[pos:])
    return "".join(out), sorted(refusals, key=lambda r: r.line)


OUTSIDE = (
    "it stands in the program's code, not inside a string literal, so the value's text "
    "would become code"
)
BACKSLASH = (
    "it follows a backslash inside the literal, so the value's first character would "
    "become part of an escape sequence"
)


def _read(runtime: str, name: str, quote: str) -> str:
    """The environment read of `name`, its quotes unlike the literal's own `quote` (an
    f-string before Python 3.12 cannot hold its own quote)."""
    q = "'" if quote[:1] != "'" else '"'
    if runtime == "uv":
        return f"__import__({q}os{q}).environ[{q}{name}{q}]"
    return f"process.env[{q}{name}{q}]"


def _line(code: str, offset: int) -> int:
    return code.count("\n", 0, offset) + 1


@dataclass
class _Literal:
    start: int  # character offsets of the whole literal in the code
    end: int
    kind: str  # "plain", "fstring" (Python), "template" (JS), "comment", "refused:<why>"
    prefix: str = ""
    quote: str = ""
    holes: tuple[tuple[int, int], ...] = ()  # code inside the literal: f-string fields, ${...}

    def rewrite(self, code: str, refs, env_name) -> tuple[str, str | None]:
        if self.kind == "comment":
            return code[self.start : self.end], None  # text nobody runs
        if self.kind.startswith("refused:"):
            return "", self.kind.split(":", 1)[1]
        for s, _e in refs:
            if _escaped(code, s):
                return "", BACKSLASH
            if any(lo <= s < hi for lo, hi in self.holes):
                return "", "it stands inside an expression of the literal, which is code"
        body_start = self.start + len(self.prefix) + len(self.quote)
        body_end = self.end - len(self.quote)
        pieces, pos = [], body_start
        for s, e in refs:
            pieces.append((code[pos:s], env_name(code[s:e], self.quote)))
            pos = e
        tail = code[pos:body_end]
        if self.kind in ("fstring", "template"):
            return self._with_fields(pieces, tail), None
        joined = [
            part
            for text, read in pieces
            for part in ((self._quoted(text),) if text else ()) + (read,)
        ]
        if tail:
            joined.append(self._quoted(tail))
        return "(" + " + ".join(joined) + ")", None

    def _quoted(self, text: str) -> str:
        return f"{self.prefix}{self.quote}{text}{self.quote}"

    def _with_fields(self, pieces, tail) -> str:
        inner = "".join(
            text + ("${" + read + "}" if self.kind == "template" else "{" + read + "}")
            for text, read in pieces
        )
        return f"{self.prefix}{self.quote}{inner}{tail}{self.quote}"


def _escaped(code: str, at: int) -> bool:
    count = 0
    while at - count - 1 >= 0 and code[at - count - 1] == "\\":
        count += 1
    return count % 2 == 1


# ------------------------------------------------------------------------------ Python


def _python_literals(code: str) -> tuple[list[_Literal], str | None]:
    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def offset(row_col) -> int:
        return starts[row_col[0] - 1] + row_col[1]

    found: list[_Literal] = []
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError) as exc:
        return [], f"Python's tokenizer cannot read the script ({exc.args[0]})"
    fstring_start = None
    for token in tokens:
        kind = tokenize.tok_name.get(token.type, "")
        if kind == "COMMENT":
            found.append(_Literal(offset(token.start), offset(token.end), "comment"))
        elif kind == "STRING":
            found.append(_python_string(token.string, offset(token.start), offset(token.end)))
        elif kind == "FSTRING_START":  # Python 3.12+: an f-string is several tokens
            fstring_start = offset(token.start)
        elif kind == "FSTRING_END" and fstring_start is not None:
            whole = code[fstring_start : offset(token.end)]
            found.append(_python_string(whole, fstring_start, offset(token.end)))
            fstring_start = None
    return found, None


def _python_string(text: str, start: int, end: int) -> _Literal:
    match = _PY_PREFIX.match(text)
    if match is None:
        return _Literal(start, end, "refused:the tokenizer gave a literal it does not name")
    prefix, quote = match.group(1), match.group(2)
    if "b" in prefix.lower():
        why = "it is inside a bytes literal (b'...'), which holds bytes, not the value's text"
        return _Literal(start, end, "refused:" + why)
    kind = "fstring" if "f" in prefix.lower() else "plain"
    holes = _fstring_fields(text, start, len(prefix) + len(quote)) if kind == "fstring" else ()
    return _Literal(start, end, kind, prefix, quote, holes)


def _fstring_fields(text: str, start: int, body: int) -> tuple[tuple[int, int], ...]:
    """Where an f-string's replacement fields are (code), `{{`/`}}` being text."""
    holes, depth, opened, i = [], 0, 0, body
    while i < len(text):
        char = text[i]
        if depth == 0 and char in "{}" and text[i : i + 2] in ("{{", "}}"):
            i += 2
            continue
        if char == "{":
            if depth == 0:
                opened = i
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth == 0:
                holes.append((start + opened, start + i + 1))
        i += 1
    return tuple(holes)


# --------------------------------------------------------------------- TypeScript / JS


@lru_cache(maxsize=1)
def _typescript():
    import tree_sitter
    import tree_sitter_typescript

    return tree_sitter.Language(tree_sitter_typescript.language_typescript())


def _script_literals(code: str) -> tuple[list[_Literal], str | None]:
    import tree_sitter

    source = code.encode()
    root = tree_sitter.Parser(_typescript()).parse(source).root_node
    if root.has_error:
        return [], "the TypeScript parser cannot read the script, so where it stands is unknown"
    # tree-sitter counts bytes; the rest of this module counts characters.
    chars = _byte_to_char(code)
    found: list[_Literal] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type == "comment":
            found.append(_Literal(chars[node.start_byte], chars[node.end_byte], "comment"))
        elif node.type in ("string", "template_string"):
            start, end = chars[node.start_byte], chars[node.end_byte]
            quote = code[start]
            kind = "template" if node.type == "template_string" else "plain"
            holes = tuple(
                (chars[c.start_byte], chars[c.end_byte])
                for c in node.children
                if c.type in ("template_substitution", "escape_sequence")
            )
            found.append(_Literal(start, end, kind, "", quote, holes))
        else:
            stack.extend(node.children)
    return found, None


def _byte_to_char(code: str) -> dict[int, int]:
    table, byte = {}, 0
    for index, char in enumerate(code):
        table[byte] = index
        byte += len(char.encode())
    table[byte] = len(code)
    return table
