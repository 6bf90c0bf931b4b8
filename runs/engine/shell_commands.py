"""What a command does with its arguments, as far as running text as code is concerned.

A value passed as an argument is data for most programs. It is code for `eval`, `source`,
`trap`, a shell's `-c` string, an interpreter's `-c`/`-e` program, awk and sed programs;
a variable name (whose subscript bash evaluates) for `printf -v`, `read`, `mapfile`,
`test -v`; arithmetic for `let`. Wrappers (`env`, `timeout`, `xargs`, `sudo`, ...) are
looked through to the command they run. The tables below are the whole list.
"""

from __future__ import annotations

import re

from .shell_tree import Node, command_words, program_name, static_text

__all__ = ["Role", "argument_role", "reads_code_from_stdin", "CODE_VARIABLES"]


class Role:
    CODE = "code"
    PROGRAM = "program"  # an interpreter's program: code, but not bash
    NAME = "name"
    ARITH = "arith"
    COMMAND = "command"
    SHELL_ARGS = "shell args"  # positional parameters of `sh -c CODE`: code decides


SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "busybox"}
# Everything after the command name is code.
CODE_RUNNERS = {"eval", "source", ".", "trap", "watch", "parallel"}
# interpreter -> options whose next argument (or joined rest) is a program.
INTERPRETERS = {
    "python": {"-c"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "node": {"-e", "--eval", "-p", "--print"},
    "nodejs": {"-e", "--eval", "-p", "--print"},
    "php": {"-r"},
    "lua": {"-e"},
    "Rscript": {"-e"},
    "osascript": {"-e"},
    "deno": {"eval"},
}
AWKS = {"awk", "gawk", "mawk", "nawk"}
SEDS = {"sed", "gsed"}
# wrapper -> (options that take a value, operands before the wrapped command)
WRAPPERS: dict[str, tuple[set[str], int]] = {
    "env": ({"-u", "--unset", "-C", "--chdir"}, 0),
    "exec": ({"-a"}, 0),
    "command": (set(), 0),
    "builtin": (set(), 0),
    "nohup": (set(), 0),
    "setsid": (set(), 0),
    "time": (set(), 0),
    "nice": ({"-n", "--adjustment"}, 0),
    "timeout": ({"-s", "--signal", "-k", "--kill-after"}, 1),
    "stdbuf": ({"-i", "-o", "-e"}, 0),
    "sudo": ({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T"}, 0),
    "doas": ({"-u", "-C"}, 0),
    "chroot": ({"--userspec", "--groups"}, 1),
    "ionice": ({"-c", "-n", "-p"}, 0),
    "taskset": (set(), 1),
    "flock": ({"-w", "--timeout", "-E", "--conflict-exit-code"}, 1),
    "xargs": (
        {"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--delimiter", "--max-args"}
        | {"--max-procs", "--arg-file", "--replace", "--max-lines"},
        0,
    ),
}
# wrapper option whose value is code (env -S splits a string into a command line)
WRAPPER_CODE_OPTIONS = {"env": {"-S", "--split-string"}, "flock": {"-c", "--command"}}
# Variables whose value bash or the programs it starts run as code or load as a program.
CODE_VARIABLES = {
    "PS0",
    "PS1",
    "PS2",
    "PS3",
    "PS4",
    "PROMPT_COMMAND",
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PATH",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "BASH_LOADABLES_PATH",
    "PYTHONSTARTUP",
    "PYTHONPATH",
    "PERL5OPT",
    "NODE_OPTIONS",
    "GIT_SSH_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_EDITOR",
    "GIT_PAGER",
    "EDITOR",
    "VISUAL",
    "PAGER",
}
_ASSIGNMENT_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=")


def _interpreter(name: str) -> set[str] | None:
    base = re.sub(r"[0-9.]+$", "", name)  # python3.11 -> python
    return INTERPRETERS.get(name) or INTERPRETERS.get(base)


def _is_option(word: Node) -> bool:
    value = static_text(word)
    return value is not None and len(value) > 1 and value[0] in "-+" and value != "--"


def unwrap(words: list[Node]) -> tuple[int, dict[int, str]]:
    """Index of the command a wrapper chain runs, and wrapper words with a role of their own
    (an `env NAME=value` of a code variable, an `env -S` string)."""
    roles: dict[int, str] = {}
    i = 0
    while i < len(words):
        name = program_name(words[i])
        if name not in WRAPPERS:
            return i, roles
        takes_value, operands = WRAPPERS[name]
        code_options = WRAPPER_CODE_OPTIONS.get(name, set())
        i += 1
        while i < len(words):
            value = static_text(words[i])
            if value == "--":
                i += 1
                break
            if _is_option(words[i]):
                if value in code_options:
                    roles[i + 1] = Role.CODE
                    i += 2
                    continue
                i += 2 if value in takes_value else 1
                continue
            match = _ASSIGNMENT_WORD.match(_leading_text(words[i]))
            if name == "env" and match:
                if match.group(1) in CODE_VARIABLES:
                    roles[i] = Role.CODE
                i += 1
                continue
            break
        for _ in range(operands):
            i += 1
    return i, roles


def _leading_text(word: Node) -> str:
    """The static start of a word (`NAME=` of `NAME="$x"`), "" when it starts dynamic."""
    whole = static_text(word)
    if whole is not None:
        return whole
    if word.type == "concatenation" and word.named_children:
        return static_text(word.named_children[0]) or ""
    return ""


def _shell_role(args: list[Node], j: int) -> str | None:
    """`bash -c CODE NAME ARGS...`, `bash FILE ARGS...`, options in between."""
    code_mode, operand = False, 0
    i = 0
    while i < len(args):
        value = static_text(args[i])
        if operand == 0 and value == "--":
            i += 1
            operand = -1  # the next word is an operand
            continue
        if operand == 0 and _is_option(args[i]):
            if i == j:
                return None
            if value[1:2] not in "-" and "c" in value[1:]:
                code_mode = True
            if value in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 1
            i += 1
            continue
        if i == j:
            if operand <= 0:  # the first operand: the program
                return (
                    Role.CODE
                    if code_mode or args[i].type == "process_substitution"
                    else (Role.COMMAND)
                )
            return Role.SHELL_ARGS if code_mode else None
        operand = max(operand, 0) + 1
        i += 1
    return None


def _interpreter_role(code_options: set[str], args: list[Node], j: int) -> str | None:
    """`python -c CODE ARGS`, `perl -ne CODE`, `node -e CODE`, `python FILE ARGS`."""
    letters = {o[1] for o in code_options if len(o) == 2}
    i = 0
    while i < len(args):
        value = static_text(args[i])
        lead = _leading_text(args[i])
        if value in code_options or (
            value and _is_option(args[i]) and value[1] != "-" and value[-1] in letters
        ):
            return Role.PROGRAM if i + 1 == j else None  # after the program: its argv
        if value is None and any(lead.startswith(o) for o in code_options if len(o) == 2):
            return Role.PROGRAM if i == j else None  # -c"$x", the program joined to it
        if _is_option(args[i]):
            i += 1
            continue
        if i == j:  # the first operand: a script file
            return Role.PROGRAM if args[i].type == "process_substitution" else Role.COMMAND
        return None
    return None


def _awk_role(args: list[Node], j: int, *, sed: bool) -> str | None:
    program_given = False
    i = 0
    while i < len(args):
        value = static_text(args[i]) or ""
        if _is_option(args[i]):
            if value in ("-f", "--file"):
                program_given = True
                i += 2
                continue
            if sed and value in ("-e", "--expression"):
                if i + 1 == j:
                    return Role.PROGRAM
                program_given = True
                i += 2
                continue
            if not sed and value in ("-F", "-v"):
                i += 2
                continue
            i += 1
            continue
        if i == j:
            return None if program_given else Role.PROGRAM
        if not program_given:
            program_given = True
        i += 1
    return None


def _name_taker_role(name: str, args: list[Node], j: int) -> str | None:
    """Arguments bash reads as variable names (whose subscripts it evaluates)."""
    previous = static_text(args[j - 1]) if j else None
    if name == "printf":
        return Role.NAME if previous == "-v" else None
    if name in ("test", "["):
        return Role.NAME if previous in ("-v", "-R") else None
    if name == "wait":
        return Role.NAME if previous == "-p" else None
    if name == "getopts":
        return Role.NAME if j == 1 else None
    if name in ("read", "mapfile", "readarray"):
        if previous == "-C" and name != "read":
            return Role.CODE
        with_value = {"-d", "-i", "-n", "-N", "-p", "-t", "-u", "-O", "-s", "-c", "-C"}
        if previous == "-a" and name == "read":
            return Role.NAME
        if previous in with_value or _is_option(args[j]):
            return None
        return Role.NAME
    if name == "unset":
        return None if _is_option(args[j]) else Role.NAME
    if name == "let":
        return Role.ARITH
    if name == "alias":
        return Role.CODE
    return None


def argument_role(command: Node, child: Node) -> str | None:
    """The role of the argument `child` (a direct child of `command`) for the program run."""
    words = command_words(command)
    if child not in words:
        return None
    k = words.index(child)
    start, roles = unwrap(words)
    if k in roles:
        return roles[k]
    if k < start:
        return None
    if k == start:
        return Role.COMMAND
    name = program_name(words[start])
    if name is None:
        return None
    args, j = words[start + 1 :], k - start - 1
    if name in CODE_RUNNERS:
        return Role.CODE
    if name in SHELLS or name in ("su", "script") and _has(args, "-c"):
        return _shell_role(args, j)
    if name == "ssh":
        return Role.CODE if any(not _is_option(a) for a in args[:j]) else None
    if name in AWKS or name in SEDS:
        return _awk_role(args, j, sed=name in SEDS)
    if (options := _interpreter(name)) is not None:
        return _interpreter_role(options, args, j)
    return _name_taker_role(name, args, j)


def _has(args: list[Node], option: str) -> bool:
    return any(static_text(a) == option for a in args)


def reads_code_from_stdin(command: Node) -> bool:
    """Whether what reaches this command's standard input is run as code: a shell or an
    interpreter with no program named, `source /dev/stdin`, xargs running a shell."""
    if command.type != "command":
        return False
    words = command_words(command)
    start, _ = unwrap(words)
    if start >= len(words):
        return False
    name = program_name(words[start])
    wrapped_by_xargs = any(program_name(w) == "xargs" for w in words[:start])
    if name is None:
        return False
    args = words[start + 1 :]
    if wrapped_by_xargs and (name in SHELLS or name in CODE_RUNNERS or _interpreter(name)):
        return True
    if name in SHELLS:
        options = [static_text(a) or "" for a in args if _is_option(a)]
        if any(o[1:2] != "-" and "c" in o[1:] for o in options):
            return False
        return "-s" in options or not [a for a in args if not _is_option(a)]
    if name in ("source", "."):
        return bool(args) and static_text(args[0]) in ("/dev/stdin", "-", "/proc/self/fd/0")
    if _interpreter(name) is not None:
        operands = [a for a in args if not _is_option(a)]
        options = _interpreter(name) or set()
        if any(static_text(a) in options for a in args):
            return False
        return not operands or static_text(operands[0]) == "-"
    return False
