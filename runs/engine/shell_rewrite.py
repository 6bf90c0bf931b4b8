"""Give a peer's bash its meaning where it pastes a value into literal text, safely.

The peer (Archon) pastes a value's text into the script before bash reads it, so
`echo '$node.output'` prints the value and a quoted heredoc (`<<'EOF'`) includes it. The
console never pastes a value (runs.engine.variables), so those places would print the
reference's name; the checker refuses them. Where bash has an exact way to say "this text,
here" with the value as data, a recipe is rewritten once, when it loads:

- inside single quotes: end the quote, reference the value in double quotes, reopen it
  (`'abc$x.output def'` -> `'abc'"$x.output"' def'`);
- inside a quoted heredoc: the same body as an unquoted heredoc, its own `$`, backquotes
  and backslashes escaped, the reference left to be expanded (as data);
- after a backslash, a name every step's environment carries (`\\$ARTIFACTS_DIR`): the
  peer pastes the text there and the shell that finally reads it drops the backslash; the
  author deferred it to an inner shell, so it becomes `\\${ARTIFACTS_DIR}`, text that the
  inner shell reads from the same environment (and the checker follows).

A rewrite is kept only where the rewritten reference stands in a safe place, or in one a
bash step checks when it starts (runs.engine.shell_checks: `python3 -c 'print($n.output)'`
becomes a program that gets an integer); a single-quoted string handed to `bash -c` stays
refused: it is code either way.
"""

from __future__ import annotations

from .shell_analysis import _with_placeholders
from .shell_checks import CHECKED
from .shell_context import SAFE, Context, plan, reference_spans
from .shell_tree import Node, parse

__all__ = ["ENVIRONMENT_NAMES", "rewrite_literal_references"]

# The names every bash step finds in its environment (runs.executor.context.step_env).
ENVIRONMENT_NAMES = frozenset(
    {"$ARTIFACTS_DIR", "$WORKFLOW_ID", "$USER_MESSAGE", "$ARGUMENTS", "$BASE_BRANCH", "$DOCS_DIR"}
)
REWRITTEN = (Context.SQUOTE, Context.QHEREDOC, Context.ESCAPED)


def rewrite_literal_references(script: str) -> str:
    """`script` with every reference in single quotes, a quoted heredoc or after a
    backslash rewritten as described above, where that is safe; else unchanged."""
    spans = reference_spans(script)
    if not spans:
        return script
    contexts, _ = plan(script, spans)
    wanted = {i for i, c in enumerate(contexts) if c in REWRITTEN}
    for _ in range(3):  # drop the rewrites that land somewhere unsafe, then try again
        if not wanted:
            return script
        rewritten, moved = _rewrite(script, spans, contexts, wanted)
        kept = [(i, span) for i, span in enumerate(moved) if span is not None]
        new_contexts, _ = plan(rewritten, [span for _, span in kept])
        unsafe = {
            i
            for (i, _), c in zip(kept, new_contexts, strict=True)
            if c not in SAFE and c not in CHECKED  # a bash step checks those when it starts
        }
        unsafe &= wanted
        if not unsafe:
            return rewritten
        wanted -= unsafe
    return script


def _rewrite(script, spans, contexts, wanted) -> tuple[str, list[tuple[int, int]]]:
    """The rewritten script and where each reference now stands (characters)."""
    refs = [script[start:end] for start, end in spans]
    source, places = _with_placeholders(script, spans)
    root = parse(source)
    edits: dict[int, tuple[int, bytes]] = {}  # start byte -> (end byte, replacement)
    heredocs: dict[int, Node] = {}
    for index, (start, _end) in enumerate(places):
        if index not in wanted:
            continue
        node = root.descendant_for_byte_range(start, start + 1)
        if contexts[index] is Context.ESCAPED:
            if refs[index] not in ENVIRONMENT_NAMES:
                continue
            # `\$NAME` -> `\${NAME}`: the placeholder becomes the braced name.
            edits[start] = (places[index][1], ("${" + refs[index][1:] + "}").encode())
            continue
        literal = _enclosing(node, ("raw_string", "ansi_c_string", "heredoc_redirect"))
        if literal is None or literal.type == "ansi_c_string":
            continue  # $'...' reads backslashes: no exact split
        if literal.type == "raw_string":
            edits[start] = (places[index][1], b"'\"" + refs[index].encode() + b"\"'")
        else:
            heredocs[literal.start_byte] = literal
    for redirect in heredocs.values():
        _unquote_heredoc(redirect, source, places, refs, wanted, edits)
    out: list[str] = []
    moved: list[tuple[int, int] | None] = [None] * len(refs)
    size = pos = 0
    spots = sorted(  # an edit first where it starts at a placeholder (it replaces it)
        [(start, end, text, -1) for start, (end, text) in edits.items()]
        + [(start, end, None, i) for i, (start, end) in enumerate(places)],
        key=lambda spot: (spot[0], spot[2] is None),
    )
    for start, end, replacement, index in spots:
        if start < pos:
            continue  # inside an edit already applied (a heredoc body)
        before = source[pos:start].decode()
        out.append(before)
        size += len(before)
        piece = refs[index] if replacement is None else replacement.decode()
        # Where the references of this piece stand now (none for `\${NAME}`).
        cursor = 0
        for i, (s, _e) in enumerate(places):
            if i == index or (replacement is not None and start <= s < end):
                at = piece.find(refs[i], cursor)
                if at >= 0:
                    moved[i] = (size + at, size + at + len(refs[i]))
                    cursor = at + len(refs[i])
        out.append(piece)
        size += len(piece)
        pos = end
    out.append(source[pos:].decode())
    return "".join(out), moved


def _enclosing(node: Node | None, types) -> Node | None:
    while node is not None and node.type not in types:
        node = node.parent
    return node


def _unquote_heredoc(redirect: Node, source: bytes, places, refs, wanted, edits) -> None:
    """`<<'EOF'` -> `<<EOF`, its body escaped for an unquoted heredoc, references kept."""
    parts = {child.type: child for child in redirect.children}
    opener, body, closer = (parts.get(k) for k in ("heredoc_start", "heredoc_body", "heredoc_end"))
    if opener is None or body is None or closer is None:
        return
    word = opener.text.decode()
    plain = word.replace("'", "").replace('"', "").replace("\\", "")
    if not plain or plain != closer.text.decode().strip():
        return
    low = source.rfind(b"\n", 0, body.start_byte) + 1
    high = closer.start_byte
    inside = [(i, s, e) for i, (s, e) in enumerate(places) if low <= s < high]
    if any(i not in wanted for i, _, _ in inside):
        return  # a reference the rewrite would not keep safe: leave the heredoc as it is
    escaped: list[bytes] = []
    pos = low
    for i, start, end in inside:
        escaped += [_escape(source[pos:start]), refs[i].encode()]
        pos = end
    escaped.append(_escape(source[pos:high]))
    edits[opener.start_byte] = (opener.end_byte, plain.encode())
    edits[low] = (high, b"".join(escaped))


def _escape(text: bytes) -> bytes:
    return text.replace(b"\\", b"\\\\").replace(b"$", b"\\$").replace(b"`", b"\\`")
