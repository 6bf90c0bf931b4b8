"""``when:`` condition expressions: a tiny parser and evaluator.

Grammar (``and`` binds tighter than ``or``; ``not`` tighter than both)::

    expr       := or_expr
    or_expr    := and_expr (("or" | "||") and_expr)*
    and_expr   := not_expr (("and" | "&&") not_expr)*
    not_expr   := ("not" | "!") not_expr | primary
    primary    := "(" expr ")" | comparison
    comparison := operand (CMP operand)?
    CMP        := "==" | "!=" | "<" | "<=" | ">" | ">="
    operand    := $node.output[.field] | $LOOP_PREV.node.output[.field]
                | 'string' | "string" | NUMBER | true | false

Semantics:

* Every operand is a string. References resolve through the caller's
  ``resolve`` callback ("" when missing/skipped); surrounding whitespace of a
  resolved value is stripped (so ``echo red`` compares equal to ``'red'``).
  Bare numbers and ``true``/``false`` are the literal strings ``"80"``,
  ``"true"``...
* ``==`` / ``!=`` compare strings exactly.
* ``<``, ``<=``, ``>``, ``>=`` compare numerically; when either side is not a
  number the comparison is simply **false** (it never raises at evaluation).
* A reference alone is truthy when its value is non-empty. A literal alone
  is rejected at parse time (it would be a constant condition).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "And",
    "Compare",
    "Condition",
    "ConditionError",
    "Literal",
    "Not",
    "Or",
    "Ref",
    "Truthy",
    "evaluate",
    "parse_condition",
    "references",
]

Resolver = Callable[[str, str | None, bool], str]


class ConditionError(Exception):
    """Malformed condition; ``column`` is 1-based (0 when unknown)."""

    def __init__(self, message: str, column: int = 0) -> None:
        super().__init__(message)
        self.column = column


@dataclass(frozen=True)
class Ref:
    node: str
    field: str | None = None
    loop_prev: bool = False


@dataclass(frozen=True)
class Literal:
    value: str


@dataclass(frozen=True)
class Compare:
    op: str
    left: Ref | Literal
    right: Ref | Literal


@dataclass(frozen=True)
class Truthy:
    operand: Ref


@dataclass(frozen=True)
class Not:
    operand: Expr


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr


Expr = Compare | Truthy | Not | And | Or


@dataclass(frozen=True)
class Condition:
    source: str
    root: Expr


# A ``when:`` is a short expression; anything nested deeper (parentheses, ``not`` chains,
# long ``and``/``or`` chains) is refused at validation rather than overflowing the stack
# of the parser or of the evaluator, which both recurse.
MAX_CONDITION_DEPTH = 64

# --------------------------------------------------------------------------- lexer

_NODE_ID = r"[A-Za-z0-9_-]+"
_FIELD = r"[A-Za-z_][A-Za-z0-9_]*"
_TOKEN_RE = re.compile(
    rf"""
    (?P<ws>\s+)
  | (?P<ref>\$(?P<prev>LOOP_PREV\.)?(?P<node>{_NODE_ID})\.output(?:\.(?P<field>{_FIELD}))?
        (?![A-Za-z0-9_.-]))
  | (?P<str>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*")
  | (?P<num>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![A-Za-z0-9_]))
  | (?P<op>==|!=|<=|>=|<|>|&&|\|\||!|\(|\))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE,
)
_WORDS = {"and", "or", "not", "true", "false"}
_CMP = {"==", "!=", "<", "<=", ">", ">="}


@dataclass(frozen=True)
class _Tok:
    kind: str  # ref | lit | op | end
    text: str
    col: int
    value: object = None


def _unescape(body: str) -> str:
    return re.sub(r"\\(.)", r"\1", body, flags=re.DOTALL)


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        m = _TOKEN_RE.match(src, pos)
        col = pos + 1
        if not m:
            snippet = src[pos : pos + 20]
            if src[pos] in "'\"":
                raise ConditionError(f"unterminated string at column {col}", col)
            raise ConditionError(f"unexpected {snippet!r} at column {col}", col)
        kind = m.lastgroup if m.lastgroup in {"ws", "str", "num", "op", "word"} else "ref"
        text = m.group(0)
        if kind == "ref":
            value = Ref(m.group("node"), m.group("field"), bool(m.group("prev")))
            toks.append(_Tok("ref", text, col, value))
        elif kind == "str":
            toks.append(_Tok("lit", text, col, _unescape(text[1:-1])))
        elif kind == "num":
            toks.append(_Tok("lit", text, col, text))
        elif kind == "op":
            toks.append(_Tok("op", text, col))
        elif kind == "word":
            if text not in _WORDS:
                raise ConditionError(
                    f"unexpected word {text!r} at column {col}"
                    " (quote string literals; references look like $node.output)",
                    col,
                )
            if text in ("true", "false"):
                toks.append(_Tok("lit", text, col, text))
            else:
                toks.append(_Tok("op", text, col))
        pos = m.end()
    toks.append(_Tok("end", "", len(src) + 1))
    return toks


# -------------------------------------------------------------------------- parser


class _Parser:
    def __init__(self, src: str) -> None:
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0
        self.depth = 0

    def nest(self, tok: _Tok) -> None:
        self.depth += 1
        if self.depth > MAX_CONDITION_DEPTH:
            raise ConditionError(
                f"condition nests more than {MAX_CONDITION_DEPTH} levels deep at column"
                f" {tok.col}; split it or simplify it",
                tok.col,
            )

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def at_op(self, *names: str) -> bool:
        tok = self.peek()
        return tok.kind == "op" and tok.text in names

    def fail(self, tok: _Tok, expected: str) -> ConditionError:
        found = "end of expression" if tok.kind == "end" else repr(tok.text)
        return ConditionError(f"expected {expected} at column {tok.col}, found {found}", tok.col)

    def parse(self) -> Expr:
        if self.peek().kind == "end":
            raise ConditionError("empty condition", 1)
        node = self.or_expr()
        if self.peek().kind != "end":
            raise self.fail(self.peek(), "'and', 'or' or end of expression")
        return node

    def or_expr(self) -> Expr:
        start = self.depth
        node = self.and_expr()
        while self.at_op("or", "||"):
            # Each operator adds a level to the (left-deep) tree the evaluator walks.
            self.nest(self.take())
            node = Or(node, self.and_expr())
        self.depth = start
        return node

    def and_expr(self) -> Expr:
        start = self.depth
        node = self.not_expr()
        while self.at_op("and", "&&"):
            self.nest(self.take())
            node = And(node, self.not_expr())
        self.depth = start
        return node

    def not_expr(self) -> Expr:
        if self.at_op("not", "!"):
            self.nest(self.take())
            node = Not(self.not_expr())
            self.depth -= 1
            return node
        return self.primary()

    def primary(self) -> Expr:
        if self.at_op("("):
            self.nest(self.take())
            node = self.or_expr()
            if not self.at_op(")"):
                raise self.fail(self.peek(), "')'")
            self.take()
            self.depth -= 1
            return node
        left_tok = self.peek()
        left = self.operand()
        if self.peek().kind == "op" and self.peek().text in _CMP:
            op = self.take().text
            return Compare(op, left, self.operand())
        if isinstance(left, Literal):
            raise ConditionError(
                f"literal {left_tok.text} at column {left_tok.col} must be compared"
                " with ==, !=, <, <=, > or >=",
                left_tok.col,
            )
        return Truthy(left)

    def operand(self) -> Ref | Literal:
        tok = self.peek()
        if tok.kind == "ref":
            self.take()
            return tok.value
        if tok.kind == "lit":
            self.take()
            return Literal(tok.value)
        raise self.fail(tok, "a $node.output reference or a literal")


def parse_condition(expr: str) -> Condition:
    """Parse a ``when:`` expression; raise ConditionError naming the column."""
    if not isinstance(expr, str):
        raise ConditionError(f"condition must be a string, got {type(expr).__name__}")
    return Condition(expr, _Parser(expr).parse())


# ----------------------------------------------------------------------- evaluator


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) else value


def _value(operand: Ref | Literal, resolve: Resolver) -> str:
    if isinstance(operand, Literal):
        return operand.value
    return (resolve(operand.node, operand.field, operand.loop_prev) or "").strip()


def _compare(op: str, left: str, right: str) -> bool:
    if op == "==":
        return left == right
    if op == "!=":
        return left != right
    a, b = _number(left), _number(right)
    if a is None or b is None:
        return False
    return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


def _eval(node: Expr, resolve: Resolver) -> bool:
    if isinstance(node, Compare):
        return _compare(node.op, _value(node.left, resolve), _value(node.right, resolve))
    if isinstance(node, Truthy):
        return _value(node.operand, resolve) != ""
    if isinstance(node, Not):
        return not _eval(node.operand, resolve)
    if isinstance(node, And):
        return _eval(node.left, resolve) and _eval(node.right, resolve)
    if isinstance(node, Or):
        return _eval(node.left, resolve) or _eval(node.right, resolve)
    raise TypeError(f"unknown condition node {node!r}")


def evaluate(cond: Condition, resolve: Resolver) -> bool:
    """Evaluate ``cond``; ``resolve(node_id, field, loop_prev)`` returns the text value.

    ``and``/``or`` short-circuit, so the right side is not resolved when the
    left side already decides the result.
    """
    return _eval(cond.root, resolve)


def _refs(node: Expr | Ref | Literal, acc: set[tuple[str, bool]]) -> None:
    if isinstance(node, Ref):
        acc.add((node.node, node.loop_prev))
    elif isinstance(node, Compare):
        _refs(node.left, acc)
        _refs(node.right, acc)
    elif isinstance(node, Truthy | Not):
        _refs(node.operand, acc)
    elif isinstance(node, And | Or):
        _refs(node.left, acc)
        _refs(node.right, acc)


def references(cond: Condition) -> set[tuple[str, bool]]:
    """Every node referenced by ``cond`` as ``(node_id, is_loop_prev)``."""
    acc: set[tuple[str, bool]] = set()
    _refs(cond.root, acc)
    return acc
