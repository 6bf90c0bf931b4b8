"""Reading recipe YAML safely: plain data plus a :class:`LineMap` of where each field was.

Hostile input is bounded (bytes, nesting depth, alias-expanded node count) and every
failure becomes a positioned :class:`Problem`; nothing here raises for bad input.
"""

from __future__ import annotations

import contextlib
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import AliasEvent
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from recipes.problems import LineMap, Problem, child_path, short_repr

__all__ = ["MAX_DEPTH", "MAX_NODES", "MAX_SOURCE_BYTES", "YamlTooLarge", "parse_yaml"]

MAX_SOURCE_BYTES = 1_000_000
MAX_DEPTH = 50
MAX_NODES = 100_000

_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlTooLarge(ValueError):
    """The document exceeds one of the size limits (bytes, depth, expanded nodes)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.message = message
        self.line = line
        self.column = column


try:  # libyaml's event parser is ~10x faster; composition stays in Python.
    from yaml._yaml import CParser as _EventParser

    def _init_parser(loader: Any, source: str) -> None:
        _EventParser.__init__(loader, source)

except ImportError:  # pragma: no cover - exercised only without libyaml
    from yaml.parser import Parser as _PyParser
    from yaml.reader import Reader
    from yaml.scanner import Scanner

    class _EventParser(Reader, Scanner, _PyParser):
        pass

    def _init_parser(loader: Any, source: str) -> None:
        Reader.__init__(loader, source)
        Scanner.__init__(loader)
        _PyParser.__init__(loader)


class _BoundedLoader(Composer, _EventParser, SafeConstructor, Resolver):
    """Composer that bounds nesting depth and the alias-expanded node count.

    The count is accumulated while composing: an alias adds the full expanded size
    of the node it refers to, so an alias bomb is rejected long before anything is
    expanded.
    """

    def __init__(self, source: str):
        _init_parser(self, source)
        Composer.__init__(self)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self._depth = 0
        self._expanded = 0
        self._shape: dict[int, tuple[int, int]] = {}  # id(node) -> (size, height)
        self.aliased: set[int] = set()  # ids of nodes some alias refers to
        self.alias_marks: dict[tuple[int, int], Any] = {}  # (id(seq), index) -> alias mark

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        if self.check_event(AliasEvent):
            mark = self.peek_event().start_mark
            node = super().compose_node(parent, index)
            shape = self._shape.get(id(node))
            if shape is None:
                raise YamlTooLarge(
                    "recursive alias: an anchor cannot refer to itself",
                    mark.line + 1,
                    mark.column + 1,
                )
            size, height = shape
            self._count(size, mark)
            self.aliased.add(id(node))
            if isinstance(parent, SequenceNode) and isinstance(index, int):
                self.alias_marks[(id(parent), index)] = mark
            if self._depth + height > MAX_DEPTH:
                raise YamlTooLarge(
                    f"nesting is deeper than {MAX_DEPTH} levels", mark.line + 1, mark.column + 1
                )
            return node
        mark = self.peek_event().start_mark
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise YamlTooLarge(
                f"nesting is deeper than {MAX_DEPTH} levels", mark.line + 1, mark.column + 1
            )
        before = self._expanded
        self._count(1, mark)
        node = super().compose_node(parent, index)
        self._depth -= 1
        height = 1
        if isinstance(node, SequenceNode):
            children: list[Node] = node.value
        elif isinstance(node, MappingNode):
            children = [n for pair in node.value for n in pair]
        else:
            children = []
        for child in children:
            child_shape = self._shape.get(id(child))
            if child_shape is not None:
                height = max(height, child_shape[1] + 1)
        self._shape[id(node)] = (self._expanded - before, height)
        return node

    def _count(self, amount: int, mark: Any) -> None:
        self._expanded += amount
        if self._expanded > MAX_NODES:
            raise YamlTooLarge(
                f"document expands to more than {MAX_NODES} YAML nodes "
                "(aliases are counted at their expanded size)",
                mark.line + 1,
                mark.column + 1,
            )


def _position_from_offset(source: str, offset: int, in_bytes: bool) -> tuple[int, int]:
    if in_bytes:
        head = source.encode("utf-8", "surrogatepass")[:offset].decode("utf-8", "replace")
    else:
        head = source[:offset]
    line = head.count("\n") + 1
    column = len(head) - (head.rfind("\n") + 1) + 1
    return line, column


def _char_at(source: str, line: int, column: int) -> str:
    lines = source.split("\n", line + 1)
    if line < len(lines) and column < len(lines[line]):
        return lines[line][column]
    return ""


def _yaml_error_problem(source: str, exc: yaml.YAMLError) -> Problem:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        context = exc.context or ""
        if context and exc.context_mark is not None and exc.problem_mark is not None:
            context += f" (line {exc.context_mark.line + 1})"
        text = ", ".join(part for part in (context, exc.problem) if part) or "syntax error"
        line = mark.line + 1 if mark is not None else None
        column = mark.column + 1 if mark is not None else None
        if mark is not None and _char_at(source, mark.line, mark.column) == "\t":
            text += " (tabs cannot be used for indentation; use spaces)"
        return Problem("", line, column, f"invalid YAML: {text}")
    if isinstance(exc, yaml.reader.ReaderError):
        in_bytes = exc.encoding != "unicode"  # libyaml reports byte offsets
        line, column = _position_from_offset(source, int(exc.position), in_bytes=in_bytes)
        char = exc.character
        shown = f"#x{char:04x}" if isinstance(char, int) else repr(char)
        return Problem(
            "", line, column, f"invalid YAML: unacceptable character {shown} ({exc.reason})"
        )
    return Problem("", 1, 1, f"invalid YAML: {exc}")


class _Converter:
    """Turns a composed node graph into plain Python data plus a :class:`LineMap`."""

    def __init__(self, loader: _BoundedLoader):
        self.loader = loader
        self.lines = LineMap()
        self.problems: list[Problem] = []
        self.visited = 0
        self._shared: dict[int, Any] = {}

    def convert(self, node: Node, path: str, depth: int = 1) -> Any:
        """Aliased nodes are converted once and shared, as PyYAML itself does; their
        positions are recorded at the anchor only (paths below an alias fall back to
        the alias itself)."""
        if id(node) in self._shared:
            return self._shared[id(node)]
        value = self._convert(node, path, depth)
        if id(node) in self.loader.aliased:
            self._shared[id(node)] = value
        return value

    def _convert(self, node: Node, path: str, depth: int) -> Any:
        self.visited += 1
        if depth > MAX_DEPTH or self.visited > MAX_NODES:
            mark = node.start_mark
            raise YamlTooLarge("document is too large or too deeply nested", *_pos(mark))
        if isinstance(node, ScalarNode):
            try:
                return self.loader.construct_object(node, deep=True)
            except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
                reason = getattr(exc, "problem", None) or str(exc)
                self.problems.append(
                    Problem(path, *_pos(node.start_mark), f"invalid YAML value: {reason}")
                )
                return None
        if isinstance(node, SequenceNode):
            if node.tag != _SEQ_TAG:
                self._unsupported_tag(node, path)
                return None
            out = []
            for i, item in enumerate(node.value):
                item_path = child_path(path, i)
                mark = self.loader.alias_marks.get((id(node), i), item.start_mark)
                self.lines.set(item_path, *_pos(mark))
                out.append(self.convert(item, item_path, depth + 1))
            return out
        if isinstance(node, MappingNode):
            if node.tag != _MAP_TAG:
                self._unsupported_tag(node, path)
                return None
            return self._mapping(node, path, depth)
        return None  # pragma: no cover

    def _unsupported_tag(self, node: Node, path: str) -> None:
        self.problems.append(
            Problem(path, *_pos(node.start_mark), f"unsupported YAML tag {node.tag!r}")
        )

    def _mapping(self, node: MappingNode, path: str, depth: int) -> dict:
        out: dict[str, Any] = {}
        first_seen: dict[str, int] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self.problems.append(
                    Problem(path, *_pos(key_node.start_mark), "mapping keys must be plain scalars")
                )
                continue
            key = str(key_node.value)
            line, column = _pos(key_node.start_mark)
            if key in first_seen:
                self.problems.append(
                    Problem(
                        child_path(path, key),
                        line,
                        column,
                        f"duplicate key {short_repr(key)} (first defined on line {first_seen[key]})",
                    )
                )
            else:
                first_seen[key] = line
            key_path = child_path(path, key)
            self.lines.set(key_path, line, column)
            if isinstance(value_node, ScalarNode) and value_node.style in ("|", ">"):
                self.lines.mark_block(key_path)
            out[key] = self.convert(value_node, key_path, depth + 1)
        for merge_node in merges:
            sources = merge_node.value if isinstance(merge_node, SequenceNode) else [merge_node]
            for source in sources:
                if not isinstance(source, MappingNode) or source.tag != _MAP_TAG:
                    self.problems.append(
                        Problem(
                            path, *_pos(source.start_mark), "a merge key ('<<') needs a mapping"
                        )
                    )
                    continue
                merged = self._mapping(source, path, depth)
                for key, value in merged.items():
                    out.setdefault(key, value)
        return out


def _pos(mark: Any) -> tuple[int | None, int | None]:
    if mark is None:
        return (None, None)
    return (mark.line + 1, mark.column + 1)


def parse_yaml(source: str) -> tuple[Any, LineMap, list[Problem]]:
    """Parse ``source`` into plain data and a line map.

    Returns ``(data, lines, errors)``; when YAML is unusable ``data`` is ``None``
    and ``errors`` explains why.  Raises nothing for bad input.
    """
    if isinstance(source, bytes | bytearray):
        try:
            source = bytes(source).decode("utf-8")
        except UnicodeDecodeError as exc:
            line, column = _position_from_offset(
                bytes(source)[: exc.start].decode("utf-8", "replace"), exc.start, False
            )
            return None, LineMap(), [Problem("", line, column, "recipe is not valid UTF-8 text")]
    if not isinstance(source, str):
        return None, LineMap(), [Problem("", None, None, "recipe source must be text")]
    size = (
        len(source)
        if len(source) > MAX_SOURCE_BYTES
        else len(source.encode("utf-8", "surrogatepass"))
    )
    if size > MAX_SOURCE_BYTES:
        return (
            None,
            LineMap(),
            [
                Problem(
                    "",
                    None,
                    None,
                    f"recipe is too large ({size} bytes; the limit is {MAX_SOURCE_BYTES})",
                )
            ],
        )
    loader: _BoundedLoader | None = None
    try:
        loader = _BoundedLoader(source)
        root = loader.get_single_node()
        if root is None:
            return None, LineMap(), [Problem("", 1, 1, "recipe is empty")]
        converter = _Converter(loader)
        converter.lines.set("", *_pos(root.start_mark))
        data = converter.convert(root, "")
        return data, converter.lines, converter.problems
    except YamlTooLarge as exc:
        return None, LineMap(), [Problem("", exc.line, exc.column, exc.message)]
    except yaml.YAMLError as exc:
        return None, LineMap(), [_yaml_error_problem(source, exc)]
    except UnicodeError as exc:
        start = getattr(exc, "start", 0)
        line, column = _position_from_offset(source, start, False)
        return None, LineMap(), [Problem("", line, column, "recipe contains invalid text")]
    except (RecursionError, MemoryError, ValueError, TypeError, OverflowError) as exc:
        return None, LineMap(), [Problem("", 1, 1, f"could not read YAML: {exc}")]
    finally:
        if loader is not None:
            with contextlib.suppress(Exception):
                loader.dispose()
