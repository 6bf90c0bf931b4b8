"""Where one occurrence of a value stands in a parsed script: walk up its syntax tree.

Each ancestor may make the place unsafe (arithmetic, a subscript, a command that runs its
argument as code, a heredoc fed to a shell, ...); the nearest quoting decides how a safe
reference is written. While walking, assignments and loops that copy a value into a
script variable are noted (``ScriptInfo.copies``): the checker then follows those
variables too. Streams fail closed: when any stage of a pipeline, or the command of a
redirect, runs what reaches its standard input, every value in the pipeline or redirect
(heredoc bodies included) is code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .shell_commands import CommandLine, argument_role, command_line, getopts_parts
from .shell_kinds import Context, Role
from .shell_names import CODE_VARIABLES
from .shell_programs import runs_text
from .shell_stdin import reads_code_from_stdin, stdin_program_language
from .shell_tree import Node, ancestors, command_words, program_name, query, static_text, text

__all__ = [
    "ScriptInfo",
    "collect_aliases",
    "collect_declarations",
    "collect_readers",
    "context_of",
    "declaration_flags",
    "declared_name",
]

ARITH_TESTS = {"-eq", "-ne", "-lt", "-le", "-gt", "-ge"}
ROLE_CONTEXT = {
    Role.CODE: Context.EVAL,
    Role.PROGRAM: Context.PROGRAM,
    Role.NAME: Context.NAME,
    Role.ARITH: Context.ARITH,
    Role.COMMAND: Context.COMMAND,
    Role.RUN_OPTION: Context.RUN_OPTION,
}
EXPANSIONS = ("simple_expansion", "expansion")
ENV_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=")
HEREDOC_PARTS = {"<<", "<<-", "heredoc_start", "heredoc_body", "heredoc_end"}


@dataclass
class ScriptInfo:
    integers: set[str] = field(default_factory=set)  # declared -i
    associative: set[str] = field(default_factory=set)  # declared -A
    functions: set[str] = field(default_factory=set)  # defined in the script
    copies: set[str] = field(default_factory=set)  # variables a value was copied into
    indirect: set[str] = field(default_factory=set)  # n=USER_MESSAGE: ${!n} is the value
    called_with_values: set[str] = field(default_factory=set)  # functions given a value
    positional_values: bool = False  # `set -- $value`, or an inner `sh -c` script
    startup_env: bool = False  # the script sets BASH_ENV or ENV: any shell may read stdin
    aliases: set[str] = field(default_factory=set)  # alias names, with expand_aliases on
    stdin_runs_later: bool = False  # something in the script runs its stdin or a /dev/fd
    # A `sh -c CODE ... $value`: does CODE (None when not static) misuse its arguments?
    shell_args_unsafe: object = None  # callable(str | None) -> bool, set by the analyser
    feeds: dict = field(default_factory=dict)  # node -> whether it runs its stdin as code
    lines: dict = field(default_factory=dict)  # command -> its prepared words (CommandLine)


def declaration_flags(node: Node) -> str:
    flags = ""
    for child in node.named_children:
        value = static_text(child) if child.type == "word" else None
        if value and value[0] in "-+" and len(value) > 1:
            flags += value[1:]
    return flags


def declared_name(assignment: Node) -> str:
    name = assignment.child_by_field_name("name")
    if name is None:
        return ""
    if name.type == "subscript":
        name = name.child_by_field_name("name") or name
    return text(name)


def _own_expansion_context(occ: Node, info: ScriptInfo) -> Context | None:
    """`${!X}` reads X's value as a variable name (unless X statically names a value: then
    it is the value); `${X@P}` expands it like a prompt."""
    if occ.type != "expansion":
        return None
    kinds = [c.type for c in occ.children]
    if len(kinds) > 1 and kinds[1] == "!":
        subject = subject_name(occ)
        if subject in info.indirect and subject not in info.copies:
            return None
        return Context.NAME
    if "@" in kinds and kinds[kinds.index("@") + 1 : kinds.index("@") + 2] == ["P"]:
        return Context.EVAL
    return None


def subject_name(expansion: Node) -> str | None:
    """The variable an expansion reads (`HOME` of `${HOME:x}`), not one in its operands."""
    for child in expansion.named_children:
        if child.type in ("variable_name", "special_variable_name"):
            return text(child)
        if child.type == "subscript":
            name = child.child_by_field_name("name")
            return text(name) if name is not None else None
        return None
    return None


def feeds_code(node: Node, info: ScriptInfo) -> bool:
    """Whether some command inside `node` runs what reaches its standard input as code."""
    found = info.feeds.get(node)
    if found is None:
        commands = query(node, "(command) @c")
        found = any(reads_code_from_stdin(c, info.startup_env) or _alias(c, info) for c in commands)
        info.feeds[node] = found
    return found


def _alias(command: Node, info: ScriptInfo) -> bool:
    """A command named by an alias the script defines (with expand_aliases): anything."""
    words = command_words(command) if info.aliases else []
    return bool(words) and program_name(words[0]) in info.aliases


def _bare_exec(command: Node) -> bool:
    """`exec <<< TEXT`, `exec 3< FILE`: a redirect that stays for the rest of the script."""
    words = command_words(command) if command.type == "command" else []
    return len(words) == 1 and program_name(words[0]) == "exec"


def _continuation(heredoc: Node) -> list[Node]:
    """The rest of the line a heredoc starts on (`| bash` of `cat <<EOF | bash`)."""
    return [c for c in heredoc.children if c.type not in HEREDOC_PARTS]


def _feeds_input(redirect: Node) -> bool:
    if redirect.type in ("heredoc_redirect", "herestring_redirect"):
        return True
    return redirect.type == "file_redirect" and any(
        c.type.startswith("<") for c in redirect.children
    )


def _stdin_program(command: Node, redirect: Node) -> Context | None:
    """`python3 - <<'EOF'` with a program reading os.environ: a name mentioned in it is
    judged like one in `python3 -c '...'` (PROGRAM, or RUNNER when it runs text)."""
    language = stdin_program_language(command)
    if not language:
        return None
    if redirect.type == "heredoc_redirect":
        body = next((c for c in redirect.children if c.type == "heredoc_body"), None)
        program = text(body) if body is not None else None
    else:
        program = static_text(redirect.named_children[-1]) if redirect.named_children else None
    return Context.RUNNER if runs_text(language, program) else Context.PROGRAM


def _stream_rule(anc: Node, child: Node, info: ScriptInfo) -> Context | None:
    """Fail closed on streams: when any stage of a pipeline, or the command of a redirect,
    runs its input as code, every value in the pipeline or the redirect is code."""
    kind = anc.type
    if kind == "pipeline" and feeds_code(anc, info):
        return Context.EVAL
    if kind == "heredoc_redirect" and any(feeds_code(c, info) for c in _continuation(anc)):
        return Context.EVAL
    if kind == "redirected_statement":
        body = anc.child_by_field_name("body")
        if body is not None and child != body and _feeds_input(child):
            if feeds_code(body, info):
                return _stdin_program(body, child) or Context.EVAL
            if _bare_exec(body) and info.stdin_runs_later:
                return Context.EVAL
        for redirect in anc.children:
            if redirect.type == "heredoc_redirect":
                if any(feeds_code(c, info) for c in _continuation(redirect)):
                    return Context.EVAL
    return None


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
                if declared_name(owner) in info.associative:
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
        return _command_rule(anc, child, occ, info)
    return _stream_rule(anc, child, info)


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
    name = declared_name(anc)
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


def _command_rule(command: Node, child: Node, occ: Node, info: ScriptInfo) -> Context | None:
    if child.type in ("herestring_redirect", "file_redirect", "heredoc_redirect"):
        if _feeds_input(child) and _bare_exec(command) and info.stdin_runs_later:
            return Context.EVAL
        if _feeds_input(child) and reads_code_from_stdin(command, info.startup_env):
            program = _stdin_program(command, child)
            if program is not None and occ.type in EXPANSIONS:
                return Context.PROGRAM  # the value is part of the program text
            return program or Context.EVAL
        return None
    line = command_line(command, info.lines)
    words = line.words
    name = program_name(words[0]) if words else None
    k = line.index.get(child, 0)
    if name in info.aliases and k:
        return Context.EVAL
    if k:
        _note_argument_copies(command, line, k, info)
    use = argument_role(command, child, info.lines)
    if use is None:
        return None
    expanded = occ.type in EXPANSIONS
    if use.role == Role.SHELL_ARGS:
        unsafe = info.shell_args_unsafe
        return Context.EVAL if unsafe is None or unsafe(use.program) else None
    if use.role == Role.PROGRAM_ARGS:
        return Context.RUNNER if expanded and runs_text(use.language, use.program) else None
    if use.role == Role.PROGRAM and not expanded:  # a name mentioned in the program
        return Context.RUNNER if runs_text(use.language, use.program) else Context.PROGRAM
    if use.role == Role.UNKNOWN:
        return Context.UNKNOWN if expanded else None
    return ROLE_CONTEXT.get(use.role)


def _note_argument_copies(command: Node, line: CommandLine, k: int, info: ScriptInfo) -> None:
    """What a value as argument `k` of the command copies into the script's variables or
    its positional parameters (the checker then follows them)."""
    words = line.words
    name = program_name(words[0])
    if name == "env":  # env NAME=$value COMMAND: NAME is a copy
        match = ENV_ASSIGNMENT.match(text(words[k]))
        if match:
            info.copies.add(match.group(1))
    if name in info.functions:
        info.called_with_values.add(name)
    if name == "set":
        info.positional_values = True
    getopts = getopts_parts(line)
    if getopts is not None and k >= getopts[0]:
        info.copies |= getopts[1]
    if name == "printf":
        filled = info.lines.get(("printf -v", command))
        if filled is None:  # the names it fills, read once per command
            pairs = zip(words[1:], words[2:], strict=False)
            filled = [static_text(w) for b, w in pairs if static_text(b) == "-v"]
            info.lines[("printf -v", command)] = filled
        info.copies.update(name for name in filled if name)


def context_of(occ: Node, info: ScriptInfo) -> tuple[Context, Context | None]:
    """(quoting, danger): how a safe value is written here, and what makes the place unsafe
    (None when nothing does)."""
    quoting = None
    danger = _own_expansion_context(occ, info)
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
                name = declared_name(child)
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


def collect_aliases(commands: list[Node]) -> set[str]:
    """Names `alias NAME=...` defines (they are expanded when expand_aliases is on)."""
    names = set()
    for command in commands:
        words = command_words(command)
        if words and program_name(words[0]) == "alias":
            for word in words[1:]:
                match = ENV_ASSIGNMENT.match(static_text(word) or text(word))
                if match:
                    names.add(match.group(1))
    return names
