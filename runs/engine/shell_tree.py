"""The bash parser behind the shell checker: tree-sitter with its bash grammar.

tree-sitter's bash grammar follows bash's own quoting, expansion, arithmetic, heredoc,
test and declaration syntax, and says where it cannot (ERROR and MISSING nodes), so the
checker can refuse what it cannot read instead of guessing. Offsets are in UTF-8 bytes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

import tree_sitter
import tree_sitter_bash

__all__ = ["Node", "ancestors", "command_words", "first_error", "parse", "static_text", "text"]

Node = tree_sitter.Node


@lru_cache(maxsize=1)
def _language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_bash.language())


@lru_cache(maxsize=1)
def _error_query() -> tree_sitter.Query:
    return tree_sitter.Query(_language(), "(ERROR) @error (MISSING) @missing")


def parse(source: bytes) -> Node:
    """The syntax tree of `source`, with two misreadings of tree-sitter's grammar put right
    (offsets are unchanged):

    - an unquoted heredoc whose body starts with a backslash (`\\$HOME`): it takes the
      body's first line for arguments. Heredoc bodies are read again on their own
      (runs.engine.shell_analysis), so for the structure `_` stands in for that escape;
    - a `0` starting a word right before `<` (`sh 0<<< TEXT`, `sh 0< FILE`, `sh 0<<EOF`):
      bash reads it as the redirect's descriptor, standard input, as if no number were
      written; the grammar reads an argument `0` (a script file named 0) or fails. A blank
      stands in for it, so every spelling of a redirect to standard input is one."""
    parser = tree_sitter.Parser(_language())
    root = parser.parse(source).root_node
    for _ in range(MAX_PATCHES):
        spots = _misread_stdin_descriptors(root, source)
        if spots:
            for spot in spots:
                source = source[:spot] + b" " + source[spot + 1 :]
        else:
            spot = _misread_heredoc(root, source)
            if spot is None:
                break
            width = 2 if source[spot + 1 : spot + 2] in (b"$", b"`", b"\\") else 1
            source = source[:spot] + b"_" * width + source[spot + width :]
        root = parser.parse(source).root_node
    return root


MAX_PATCHES = 16
# A `0` that starts a word and is followed by `<`: a redirect of standard input to bash.
_STDIN_DESCRIPTOR = re.compile(rb"(?<![^\s;&|()`])0(?=<)")


def _misread_stdin_descriptors(root: Node, source: bytes) -> list[int]:
    """Where the grammar took a `0<` redirect's descriptor for a command's argument (or its
    name, after `{ ...; }`) or could not read it: not inside a string, arithmetic or a test,
    where `0<` is text or a comparison."""
    if b"0<" not in source:
        return []
    spots = []
    for match in _STDIN_DESCRIPTOR.finditer(source):
        node = root.descendant_for_byte_range(match.start(), match.start() + 1)
        parent = node.parent if node is not None else None
        if parent is None or node.start_byte != match.start():
            continue
        as_argument = node.type == "number" and parent.type in ("command", "command_name")
        unread = node.type == "word" and parent.type == "ERROR"
        if as_argument or unread or node.type == "heredoc_start":
            spots.append(match.start())
    return spots


def _misread_heredoc(root: Node, source: bytes) -> int | None:
    """Where an unquoted heredoc body starting with a backslash starts, or None."""
    if b"<<" not in source:
        return None
    for opener in query(root, "(heredoc_start) @s"):
        if any(mark in opener.text for mark in (b"'", b'"', b"\\")):
            continue  # a quoted heredoc: the grammar reads it
        below = source.find(b"\n", opener.end_byte) + 1
        if below and source[below : below + 1] == b"\\":
            return below
    return None


def query(root: Node, pattern: str) -> list[Node]:
    found = tree_sitter.QueryCursor(_query(pattern)).captures(root)
    return sorted((n for nodes in found.values() for n in nodes), key=lambda n: n.start_byte)


@lru_cache(maxsize=16)
def _query(pattern: str) -> tree_sitter.Query:
    return tree_sitter.Query(_language(), pattern)


def first_error(root: Node) -> Node | None:
    """The first place the grammar could not follow (a syntax error or a missing token)."""
    if not root.has_error:
        return None
    found = tree_sitter.QueryCursor(_error_query()).captures(root)
    nodes = [n for group in found.values() for n in group]
    return min(nodes, key=lambda n: n.start_byte) if nodes else root


def text(node: Node) -> str:
    return node.text.decode("utf-8", "replace") if node.text is not None else ""


def ancestors(node: Node):
    """(ancestor, the child of it on the way to `node`), innermost first."""
    child = node
    parent = node.parent
    while parent is not None:
        yield parent, child
        child, parent = parent, parent.parent


_DYNAMIC = {
    "simple_expansion",
    "expansion",
    "command_substitution",
    "process_substitution",
    "arithmetic_expansion",
}


def static_text(node: Node) -> str | None:
    """What a word is once bash removes its quotes, when no expansion is in it; else None."""
    kind = node.type
    if kind in _DYNAMIC:
        return None
    if kind == "raw_string":
        return text(node)[1:-1]
    if kind == "ansi_c_string":
        return text(node)[2:-1]
    if kind in ("word", "number", "command_name", "string_content"):
        if node.named_child_count and kind == "command_name":
            return static_text(node.named_children[0])
        raw = text(node)
        if "$" in raw or "`" in raw:
            return None
        return _unescape(raw)
    if kind in ("string", "concatenation"):
        parts = []
        for child in node.named_children:
            part = static_text(child)
            if part is None:
                return None
            parts.append(part)
        if kind == "string" and not node.named_children:
            return ""
        return "".join(parts)
    return None


def _unescape(raw: str) -> str:
    out, i = [], 0
    while i < len(raw):
        if raw[i] == "\\" and i + 1 < len(raw):
            out.append(raw[i + 1])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return "".join(out)


def command_words(command: Node) -> list[Node]:
    """The command name and its arguments, in order (assignments and redirects left out)."""
    words = []
    for index, child in enumerate(command.children):
        field = command.field_name_for_child(index)
        if field in ("name", "argument"):
            words.append(child)
    return words


def program_name(word: Node) -> str | None:
    """`eval`, `bash`, ... for a static command word (`\\eval`, `/usr/bin/bash` included).

    A word whose start is dynamic but whose end is a static path (`"$ARTIFACTS_DIR/run.sh"`,
    `$dir/bin/tool`) names the program after its last `/`; any other dynamic word (`$sh`,
    `"$SHELL"`, `${b}sh`) is None: the checker cannot know what it runs."""
    value = static_text(word)
    if value is not None:
        return os.path.basename(value) or None
    tail = _static_tail(word)
    if "/" in tail:
        return tail.rsplit("/", 1)[1] or None
    return None


def _static_tail(word: Node) -> str:
    """The static text at the end of a word (`/run.sh` of `"$DIR/run.sh"`)."""
    if word.type == "command_name" and word.named_child_count:
        return _static_tail(word.named_children[0])
    if word.type not in ("string", "concatenation"):
        return static_text(word) or ""
    parts: list[str] = []
    for child in reversed(word.named_children):
        part = static_text(child)
        if part is None:
            part = _static_tail(child) if child.type == "string" else ""
            parts.append(part)
            break
        parts.append(part)
    return "".join(reversed(parts))
