"""Warnings about a script: places that are not refused but deserve a second look.

- A value as a bare argument of `git`, `tar`, `rsync`, `find`, `curl`, `wget`, `ssh` or
  `scp`, not after `--`: a value starting with `-` is read as an option
  (`runs.engine.shell_options`).
- A script that writes a value to a file and later sources or runs a file: the checker
  does not follow files, and a value written into a file that runs is code.
"""

from __future__ import annotations

import bisect
import os

from .shell_commands import SHELLS, CommandLine, command_line, role_in_words
from .shell_kinds import Notice, Role
from .shell_options import option_guard, option_injection
from .shell_programs import language_of
from .shell_tree import Node, command_words, program_name, query, static_text, text
from .shell_wrappers import exec_segments, unwrap

__all__ = ["option_notices", "written_then_run"]

WRITE_AND_RUN = (
    "sources or runs a file, and line {write} writes a value to a file before it: the "
    "checker does not follow files, and a value written into a file that runs is code; "
    "read the value from the environment where the file runs, or keep values out of "
    "files that run"
)


def _argument_word(occ: Node, source: bytes) -> Node | None:
    """The command argument a value starts (`"$X"`, `$X/x`), None when text comes first."""
    word = occ
    while word.parent is not None and word.parent.type in ("string", "concatenation"):
        word = word.parent
    if source[word.start_byte : occ.start_byte] not in (b"", b'"'):
        return None
    parent = word.parent
    return word if parent is not None and parent.type == "command" else None


def _program(words: list[Node], start: int):
    """(program, its arguments, their option guard, find's -exec segments)."""
    if start >= len(words):
        return None, [], 0, []
    name = program_name(words[start])
    args = words[start + 1 :]
    segments = exec_segments(args) if name == "find" else []
    return name, args, option_guard(name or "", args), segments


def _warning(programs: dict, line: CommandLine, k: int) -> str | None:
    """The option warning for words[k] of a prepared command, looking through wrappers and
    `find -exec`; each command's program is read once (`programs`)."""
    start = line.unwrapped[0]
    key = id(line)
    if key not in programs:
        programs[key] = _program(line.words, start)
    name, args, guard, segments = programs[key]
    j = k - start - 1
    if name is None or j < 0:
        return None
    for first, end in segments:
        if first <= j < end:  # a command find runs: read it as a command line of its own
            inner = args[first:end]
            inner_start = unwrap(inner)[0]
            name, args, guard, _ = _program(inner, inner_start)
            j -= first + inner_start + 1
            break
    return option_injection(name, args, j, guard) if name and j >= 0 else None


def option_notices(
    expanded: list[tuple[int, Node, str]], source: bytes, lines: dict
) -> list[Notice]:
    found, programs = [], {}
    for line, occ, written in expanded:
        word = _argument_word(occ, source)
        if word is None:
            continue
        prepared = command_line(word.parent, lines)
        k = prepared.index.get(word)
        message = _warning(programs, prepared, k) if k else None
        if message:
            found.append(Notice(line, written, message.replace("$REF", f'"{written}"')))
    return found


def _file_key(word: Node | None) -> str | None:
    """What names a file, as far as its text tells: `./f` and `f` are one file, and
    `"$DIR/run.sh"` is known by `run.sh`; None when nothing static names it."""
    if word is None:
        return None
    value = static_text(word)
    if value is not None:
        return os.path.normpath(value)
    tail = program_name(word)
    return "*/" + tail if tail else None


def _writes(root: Node, positions: list[int]) -> list[tuple[int, str | None]]:
    """(byte, file key) of each redirect or `tee` that writes text holding a value."""
    positions = sorted(positions)

    def holds_value(node: Node) -> bool:
        at = bisect.bisect_left(positions, node.start_byte)
        return at < len(positions) and positions[at] < node.end_byte

    found = []
    for statement in query(root, "(redirected_statement) @r"):
        if not holds_value(statement):
            continue
        for redirect in statement.children:
            if redirect.type == "file_redirect" and any(
                c.type.startswith((">", "&>")) for c in redirect.children
            ):
                target = redirect.child_by_field_name("destination")
                found.append((statement.start_byte, _file_key(target)))
    for pipeline in query(root, "(pipeline) @p"):
        if not holds_value(pipeline):
            continue
        for stage in pipeline.named_children:
            words = command_words(stage) if stage.type == "command" else []
            if words and program_name(words[0]) == "tee":
                for word in words[1:]:
                    if not (static_text(word) or "").startswith("-"):
                        found.append((pipeline.start_byte, _file_key(word)))
    return found


def _runs(root: Node) -> list[tuple[Node, Node | None]]:
    """(command, file) of each command that sources or runs a file."""
    found = []
    for command in query(root, "(command) @c"):
        words = command_words(command)
        start, _ = unwrap(words)
        if start >= len(words):
            continue
        name = program_name(words[start])
        args = words[start + 1 :]
        if name in ("source", ".") and args:
            found.append((command, args[0]))
        elif name in SHELLS or language_of(name or "") not in ("", "awk", "sed"):
            if args and (use := role_in_words(words, start + 1 + _first_operand(args))):
                if use.role == Role.COMMAND:
                    found.append((command, args[_first_operand(args)]))
        elif "/" in text(words[start]):
            found.append((command, words[start]))
    return found


def _first_operand(args: list[Node]) -> int:
    for index, word in enumerate(args):
        value = static_text(word)
        if value is None or not value.startswith("-") or value == "-":
            return index
    return len(args) - 1


def _same(written: str | None, run: str | None) -> bool:
    if written is None or run is None:
        return True
    if written.startswith("*/") or run.startswith("*/"):
        return os.path.basename(written) == os.path.basename(run)
    return written == run


def written_then_run(root: Node, positions: list[int], line_of) -> list[Notice]:
    """L1 of the security probe: `echo "$X" > f; . f`, `cat > f <<EOF ... EOF; bash f`."""
    first: dict[str | None, int] = {}  # file key -> the first write of a value to it
    for byte, key in _writes(root, positions):
        first[key] = min(byte, first.get(key, byte))
    if not first:
        return []
    found = []
    for command, target in _runs(root):
        key = _file_key(target)
        before = [b for k, b in first.items() if b < command.start_byte and _same(k, key)]
        if before:
            message = WRITE_AND_RUN.format(write=line_of(min(before)))
            found.append(Notice(line_of(command.start_byte), f"`{_short(command)}`", message))
    return found


def _short(command: Node) -> str:
    line = text(command).splitlines()[0] if text(command) else ""
    return line if len(line) <= 40 else line[:37] + "..."
