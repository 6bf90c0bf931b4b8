"""Where one occurrence of a value stands in a parsed script: walk up its syntax tree.

Each ancestor may make the place unsafe (arithmetic, a subscript, a command that runs its
argument as code, a heredoc fed to a shell, ...); the nearest quoting decides how a safe
reference is written. While walking, assignments and loops that copy a value into a
script variable are noted (``ScriptInfo.copies``): the checker then follows those
variables too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .shell_commands import CODE_VARIABLES, Role, argument_role, reads_code_from_stdin
from .shell_kinds import Context
from .shell_tree import Node, ancestors, command_words, program_name, static_text, text

__all__ = ["ScriptInfo", "collect_declarations", "collect_readers", "context_of"]

ARITH_TESTS = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}
ROLE_CONTEXT = {
    Role.CODE: Context.EVAL,
    Role.PROGRAM: Context.PROGRAM,
    Role.NAME: Context.NAME,
    Role.ARITH: Context.ARITH,
    Role.COMMAND: Context.COMMAND,
}


@dataclass
class ScriptInfo:
    integers: set[str] = field(default_factory=set)  # declared -i
    associative: set[str] = field(default_factory=set)  # declared -A
    functions: set[str] = field(default_factory=set)  # defined in the script
    copies: set[str] = field(default_factory=set)  # variables a value was copied into
    called_with_values: set[str] = field(default_factory=set)  # functions given a value
    positional_values: bool = False  # `set -- $value`, or an inner `sh -c` script
    # A `sh -c CODE ... $value` whose CODE is literal: does CODE misuse its arguments?
    shell_args_unsafe: object = None  # callable(str) -> bool, set by the analyser


def declaration_flags(node: Node) -> str:
    flags = ""
    for child in node.named_children:
        value = static_text(child) if child.type == "word" else None
        if value and value[0] in "-+" and len(value) > 1:
            flags += value[1:]
    return flags


def _declared_name(assignment: Node) -> str:
    name = assignment.child_by_field_name("name")
    if name is None:
        return ""
    if name.type == "subscript":
        name = name.child_by_field_name("name") or name
    return text(name)


def _own_expansion_context(occ: Node) -> Context | None:
    """`${!X}` reads X's value as a variable name; `${X@P}` expands it like a prompt."""
    if occ.type != "expansion":
        return None
    kinds = [c.type for c in occ.children]
    if len(kinds) > 1 and kinds[1] == "!":
        return Context.NAME
    if "@" in kinds and kinds[kinds.index("@") + 1 : kinds.index("@") + 2] == ["P"]:
        return Context.EVAL
    return None


def _stage(node: Node) -> Node:
    return node.child_by_field_name("body") if node.type == "redirected_statement" else node


def _ancestor_rule(anc: Node, child: Node, occ: Node, info: ScriptInfo) -> Context | None:
    kind = anc.type
    if kind == "arithmetic_expansion":
        return Context.ARITH
    if kind == "compound_statement" and anc.child_count and anc.children[0].type == "((":
        return Context.ARITH
    if kind == "c_style_for_statement" and child != anc.child_by_field_name("body"):
        return Context.ARITH
    if kind == "subscript" and child != anc.child_by_field_name("name"):
        array = anc.child_by_field_name("name")
        if array is not None and text(array) in info.associative:
            return None
        return Context.SUBSCRIPT
    if kind == "expansion":
        before = anc.children[: list(anc.children).index(child)]
        if any(c.type == ":" for c in before):
            return Context.ARITH  # ${x:offset:length}
        return None
    if kind == "binary_expression" and _in_double_bracket(anc):
        operator = anc.child_by_field_name("operator")
        if operator is not None and text(operator) in ARITH_TESTS:
            return Context.ARITH
    if kind == "unary_expression":
        operator = anc.child_by_field_name("operator")
        if operator is not None and text(operator) in ("-v", "-R"):
            return Context.NAME
    if kind == "variable_assignment":
        return _assignment_rule(anc, child, info)
    if kind == "array" and child.type == "concatenation":
        element = text(child)
        close = element.find("]=")
        if element.startswith("[") and close > 0 and occ.start_byte < child.start_byte + close:
            owner = anc.parent
            if owner is not None and owner.type == "variable_assignment":
                if _declared_name(owner) in info.associative:
                    return None
            return Context.SUBSCRIPT
    if kind == "declaration_command" and child.type != "variable_assignment":
        if not (child.type == "word" and text(child)[:1] in ("-", "+")):
            return Context.NAME
    if kind == "unset_command" and not text(child).startswith("-"):
        return Context.NAME
    if kind == "for_statement" and child == anc.child_by_field_name("value"):
        variable = anc.child_by_field_name("variable")
        if variable is not None:
            info.copies.add(text(variable))
    if kind == "command":
        return _command_rule(anc, child, info)
    if kind == "redirected_statement" and child != anc.child_by_field_name("body"):
        body = anc.child_by_field_name("body")
        if body is not None and reads_code_from_stdin(body):
            return Context.EVAL
    if kind == "pipeline":
        stages = [c for c in anc.named_children]
        if child in stages:
            later = stages[stages.index(child) + 1 :]
            if any(reads_code_from_stdin(_stage(s)) for s in later if s is not None):
                return Context.EVAL
    return None


def _in_double_bracket(node: Node) -> bool:
    for anc, _ in ancestors(node):
        if anc.type == "test_command":
            return anc.child_count > 0 and anc.children[0].type == "[["
        if anc.type not in ("binary_expression", "unary_expression", "parenthesized_expression"):
            return False
    return False


def _assignment_rule(anc: Node, child: Node, info: ScriptInfo) -> Context | None:
    if child != anc.child_by_field_name("value"):
        return None
    name = _declared_name(anc)
    info.copies.add(name)
    if name in CODE_VARIABLES:
        return Context.CODE_VARIABLE
    owner = anc.parent
    flags = (
        declaration_flags(owner)
        if owner is not None and owner.type == "declaration_command"
        else ""
    )
    if "n" in flags:
        return Context.NAME
    if "i" in flags or name in info.integers:
        return Context.ARITH
    return None


def _command_rule(command: Node, child: Node, info: ScriptInfo) -> Context | None:
    if child.type in ("herestring_redirect", "file_redirect", "heredoc_redirect"):
        return Context.EVAL if reads_code_from_stdin(command) else None
    words = command_words(command)
    name = program_name(words[0]) if words else None
    if name in info.functions and child in words[1:]:
        info.called_with_values.add(name)
    if name == "set" and child in words[1:]:
        info.positional_values = True
    if name == "printf" and child in words[1:]:
        for before, word in zip(words[1:], words[2:], strict=False):
            if static_text(before) == "-v" and (value := static_text(word)):
                info.copies.add(value)
    role = argument_role(command, child)
    if role == Role.SHELL_ARGS:
        return Context.EVAL if info.shell_args_unsafe and info.shell_args_unsafe(command) else None
    return ROLE_CONTEXT.get(role)


def context_of(occ: Node, info: ScriptInfo) -> tuple[Context, Context | None]:
    """(quoting, danger): how a safe value is written here, and what makes the place unsafe
    (None when nothing does)."""
    quoting = None
    danger = _own_expansion_context(occ)
    for anc, child in ancestors(occ):
        if quoting is None:
            if anc.type == "string":
                quoting = Context.DQUOTE
            elif anc.type == "heredoc_body":
                quoting = Context.HEREDOC
            elif anc.type in ("command_substitution", "process_substitution"):
                quoting = Context.BARE
        found = _ancestor_rule(anc, child, occ, info)
        if danger is None and found is not None:
            danger = found
    return quoting or Context.BARE, danger


def collect_declarations(declarations: list[Node], functions: list[Node], info: ScriptInfo):
    for node in declarations:
        flags = declaration_flags(node)
        for child in node.named_children:
            if child.type == "variable_assignment":
                name = _declared_name(child)
            elif child.type == "variable_name":
                name = text(child)
            else:
                continue
            if "i" in flags:
                info.integers.add(name)
            if "A" in flags:
                info.associative.add(name)
    for node in functions:
        name = node.child_by_field_name("name")
        if name is not None:
            info.functions.add(text(name))


def collect_readers(commands: list[Node], info: ScriptInfo) -> None:
    """Variables `read` / `mapfile` fill: whatever they read is data, never code."""
    for command in commands:
        words = command_words(command)
        if not words or program_name(words[0]) not in ("read", "mapfile", "readarray"):
            continue
        for word in words[1:]:
            value = static_text(word)
            if value and value.isidentifier():
                info.copies.add(value)
