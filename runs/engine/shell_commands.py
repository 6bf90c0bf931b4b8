"""What a command does with its arguments, as far as running text as code is concerned.

A value passed as an argument is data for most programs. It is code for `eval`, `source`,
`trap`, a shell's `-c` string, an interpreter's `-c`/`-e` program, awk and sed programs,
`su`/`runuser`/`script` arguments, any argument of `make` or of an SQL shell (`sqlite3`);
a variable name (whose subscript bash evaluates) for `printf -v`, `read`, `mapfile`,
`test -v`; arithmetic for `let`. Wrappers (`env`, `timeout`, `xargs`, `sudo`, `coproc`,
...; `runs.engine.shell_wrappers`) are looked through to the command they run, and so are
the commands `find -exec` runs. A command whose name is not static text (`$sh`, `"$SHELL"`,
`${b}sh`) is unknown: a value among its arguments is refused. What a command does with its
standard input is `runs.engine.shell_stdin`. The tables below are the whole list.
"""

from __future__ import annotations

from .shell_kinds import Role, Use
from .shell_names import CODE_VARIABLES
from .shell_options import OPTION_PROGRAMS, git_role, run_option_role
from .shell_programs import language_of
from .shell_tree import Node, command_words, program_name, static_text
from .shell_wrappers import SHELL_HANDOFF, exec_segments, is_option, leading_text, unwrap

__all__ = [
    "ARGUMENT_RUNNERS",
    "CODE_RUNNERS",
    "CODE_VARIABLES",
    "INTERPRETERS",
    "MAKES",
    "SHELLS",
    "CommandLine",
    "Role",
    "SQL_SHELLS",
    "Use",
    "argument_role",
    "awk_program",
    "command_line",
    "getopts_parts",
    "interpreter_parts",
    "role_in_words",
    "shell_options",
    "ssh_command",
]

SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "rbash", "yash", "posh", "fish"}
# Everything after the command name is code.
CODE_RUNNERS = {"eval", "source", ".", "trap", "watch", "parallel"}
# SQL shells whose arguments after the database file are SQL and dot commands, and dot
# commands run programs (`sqlite3 :memory: ".shell CMD"`, `.system`); they also run what
# reaches their standard input (runs.engine.shell_stdin).
SQL_SHELLS = {"sqlite3", "sqlite", "duckdb"}
# Programs that read code among their arguments, wherever a value stands (make reads
# `--eval=TEXT` and `NAME:=$(shell CMD)` as makefile text): any value there is code.
MAKES = {"make", "gmake", "bmake"}
ARGUMENT_RUNNERS = MAKES | SQL_SHELLS
# interpreter language -> options whose next argument (or joined rest) is a program.
INTERPRETERS = {
    "python": {"-c"},
    "perl": {"-e", "-E"},
    "ruby": {"-e"},
    "node": {"-e", "--eval", "-p", "--print", "eval"},
    "php": {"-r"},
    "lua": {"-e"},
    "r": {"-e"},
    "osascript": {"-e"},
    "tcl": {"-c"},
}
UNKNOWN_CODE_OPTIONS = {"--command", "--eval", "--exec", "--execute"}
MAX_DEPTH = 3


class CommandLine:
    """A command's words, prepared once: their positions, the wrapped command, and the
    first word naming a shell or an interpreter (for `_wrapped_shell`)."""

    __slots__ = ("words", "index", "unwrapped", "shell_at")

    def __init__(self, command: Node):
        self.words = command_words(command)
        self.index = {word: k for k, word in enumerate(self.words)}
        self.unwrapped = unwrap(self.words)
        self.shell_at = _first_shell_word(self.words, self.unwrapped[0] + 1)


def command_line(command: Node, cache: dict | None = None) -> CommandLine:
    """The prepared words of `command`, kept in `cache` (one per script checked): each
    argument is then placed without reading the whole command again."""
    if cache is None:
        return CommandLine(command)
    line = cache.get(command)
    if line is None:
        line = cache[command] = CommandLine(command)
    return line


def argument_role(command: Node, child: Node, cache: dict | None = None) -> Use | None:
    """The role of the argument `child` (a direct child of `command`) for the program run."""
    line = command_line(command, cache)
    k = line.index.get(child)
    if k is None:
        return None
    return role_in_words(line.words, k, prepared=line)


def role_in_words(
    words: list[Node], k: int, depth: int = 0, prepared: CommandLine | None = None
) -> Use | None:
    """The role of words[k] in the command line `words` (its name first)."""
    start, roles = prepared.unwrapped if prepared else unwrap(words)
    if k in roles:
        return Use(roles[k])
    if k < start or start >= len(words):
        return None
    if k == start:
        return Use(Role.COMMAND)
    name = program_name(words[start])
    args, j = words[start + 1 :], k - start - 1
    if name is None:
        return _unknown_use(args)
    if name in CODE_RUNNERS or name in SHELL_HANDOFF or name in ARGUMENT_RUNNERS:
        return Use(Role.CODE)
    if name in SHELLS:
        return _shell_use(args, j)
    if name == "find":
        for first, end in exec_segments(args):
            if first <= j < end and depth < MAX_DEPTH:
                return role_in_words(args[first:end], j - first, depth + 1)
    if name == "ssh":
        return _ssh_use(args, j)
    if name == "git":
        role = git_role(args, j)
        return Use(role) if role else None
    language = language_of(name)
    if language in ("awk", "sed"):
        return _awk_use(args, j, language)
    if language in INTERPRETERS:
        return _interpreter_use(language, args, j)
    role = run_option_role(name, args, j) or _name_taker_role(name, args, j)
    if role:
        return Use(role)
    shell_at = prepared.shell_at if prepared else _first_shell_word(words, start + 1)
    return _wrapped_shell(words, shell_at, k, depth)


def getopts_parts(line: CommandLine) -> tuple[int, set[str]] | None:
    """`getopts OPTSTRING NAME [ARGS...]` (behind `builtin`, `command`): the index of its
    first ARG (the end of the words when it parses the positional parameters) and the
    variables it fills with text of what it parses, OPTARG and NAME; None for another
    command."""
    words, start = line.words, line.unwrapped[0]
    if start >= len(words) or program_name(words[start]) != "getopts":
        return None
    named = static_text(words[start + 2]) if start + 2 < len(words) else None
    return start + 3, {"OPTARG", named} if named else {"OPTARG"}


def _unknown_use(args: list[Node]) -> Use:
    """`$sh -c CODE`, `"$SHELL" -lc CODE`: with a code option every value is code;
    otherwise the program may still be eval or a shell."""
    for word in args:
        lead = leading_text(word)
        if lead[:1] == "-" and lead[1:2] not in ("-", "") and set(lead[1:]) & {"c", "e"}:
            return Use(Role.CODE)
        if lead.split("=", 1)[0] in UNKNOWN_CODE_OPTIONS:
            return Use(Role.CODE)
    return Use(Role.UNKNOWN)


def shell_options(args: list[Node]) -> tuple[bool, int]:
    """(code mode: a `-c` alone or in a cluster, index of the first operand)."""
    code_mode, i = False, 0
    while i < len(args):
        value = static_text(args[i])
        if value == "--":
            return code_mode, i + 1
        if value is None:
            if leading_text(args[i])[:1] not in ("-", "+"):
                break
        elif not is_option(args[i]):
            break
        elif value[1:2] != "-" and "c" in value[1:]:
            code_mode = True
        if value in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 1
        i += 1
    return code_mode, i


def _shell_use(args: list[Node], j: int) -> Use | None:
    """`bash -c CODE NAME ARGS...`, `bash FILE ARGS...`, options in between."""
    code_mode, first = shell_options(args)
    if j < first:
        return Use(Role.CODE) if static_text(args[j]) is None else None
    if j == first:
        if code_mode or args[j].type == "process_substitution":
            return Use(Role.CODE)
        return Use(Role.COMMAND)
    if code_mode:
        return Use(Role.SHELL_ARGS, static_text(args[first]), "bash")
    return None


def ssh_command(args: list[Node]) -> int:
    """Index of the first word of the command `ssh [options] HOST COMMAND...` runs on the
    host (len(args) when there is none: ssh then runs a shell reading its input)."""
    value_options = OPTION_PROGRAMS["ssh"]
    i = 0
    while i < len(args):
        value = static_text(args[i])
        if value == "--":
            i += 1
            break
        if not is_option(args[i]):
            break
        i += 2 if value in value_options else 1
    return i + 1


def _ssh_use(args: list[Node], j: int) -> Use | None:
    """`ssh [options] HOST [COMMAND...]`: the command runs in a shell on the host."""
    if run_option_role("ssh", args, j):
        return Use(Role.RUN_OPTION)
    return Use(Role.CODE) if j >= ssh_command(args) else None


def interpreter_parts(language: str, args: list[Node]) -> tuple[str, int, str | None]:
    """How an interpreter is given its program: ("program", index, text) for `-c CODE` and
    `-cCODE` (the index of the word holding the program), ("file", index of the first
    operand, None) otherwise: a script file, `-` or none (index == len(args))."""
    options = INTERPRETERS[language]
    letters = {o[1] for o in options if len(o) == 2}
    i = 0
    while i < len(args):
        value = static_text(args[i])
        lead = leading_text(args[i])
        if value == "--":
            return "file", i + 1, None
        clustered = bool(value) and is_option(args[i]) and value[1] != "-"
        if value in options or (clustered and value[-1] in letters):
            return "program", i + 1, static_text(args[i + 1]) if i + 1 < len(args) else None
        joined = next((o for o in options if _joins(lead, value, o)), None)
        if joined:
            return "program", i, value[len(joined) :].lstrip("=") if value is not None else None
        if is_option(args[i]) or (value is None and lead[:1] == "-"):
            i += 1
            continue
        break
    return "file", i, None


def _interpreter_use(language: str, args: list[Node], j: int) -> Use | None:
    """`python -c CODE ARGS`, `perl -ne CODE`, `node -e CODE`, `python FILE ARGS`."""
    kind, index, program = interpreter_parts(language, args)
    if kind == "file":
        if j != index:
            return None  # an option, or an argument of the author's script file
        return Use(Role.PROGRAM if args[j].type == "process_substitution" else Role.COMMAND)
    if j == index:
        return Use(Role.PROGRAM, program, language)
    return Use(Role.PROGRAM_ARGS, program, language) if j > index else None


def _joins(lead: str, value: str | None, option: str) -> bool:
    if option[:2] == "--":
        return lead.startswith(option + "=")
    if len(option) != 2 or not lead.startswith(option):
        return False
    return value is None or len(value) > 2


def awk_program(args: list[Node], sed: bool) -> tuple[int | None, bool]:
    """(index of the program operand or None, whether a program file or -e was given)."""
    given = False
    i = 0
    while i < len(args):
        value = static_text(args[i]) or ""
        if is_option(args[i]):
            if value in ("-f", "--file") or (sed and value in ("-e", "--expression")):
                given = True
                i += 2
                continue
            i += 2 if not sed and value in ("-F", "-v") else 1
            continue
        return (None if given else i), given
    return None, given


def _awk_use(args: list[Node], j: int, language: str) -> Use | None:
    sed = language == "sed"
    index, given = awk_program(args, sed)
    previous = static_text(args[j - 1]) if j else None
    if sed:
        if j == index or previous in ("-e", "--expression"):
            return Use(Role.PROGRAM, static_text(args[j]), language)
        return None
    program = static_text(args[index]) if index is not None else None
    if j == index:
        return Use(Role.PROGRAM, program, language)
    if given:
        return None  # the program is a file of the author's
    if (
        previous == "-v"
        or leading_text(args[j]).startswith("-v")
        or (index is not None and j > index)
    ):
        return Use(Role.PROGRAM_ARGS, program, language)
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
        if previous in with_value or is_option(args[j]):
            return None
        return Role.NAME
    if name == "unset":
        return None if is_option(args[j]) else Role.NAME
    if name in ("compgen", "complete"):  # -W words are expanded, -C runs a command
        return Role.CODE if previous in ("-W", "-C") else Role.COMMAND if previous == "-F" else None
    if name in ("hash", "enable"):  # hash -p FILE NAME, enable -f LIBRARY NAME
        return Role.COMMAND if previous in ("-p", "-f") else None
    if name == "let":
        return Role.ARITH
    if name == "alias":
        return Role.CODE
    return None


def _first_shell_word(words: list[Node], start: int) -> int | None:
    for p in range(start, len(words)):
        name = program_name(words[p])
        if name in SHELLS or name == "eval" or language_of(name or "") in INTERPRETERS:
            return p
    return None


def _wrapped_shell(words: list[Node], p: int | None, k: int, depth: int) -> Use | None:
    """Any other program given a shell or an interpreter (words[p]) with its code option
    among its arguments (`docker exec c sh -c CODE`, `setpriv bash -c CODE`): that code."""
    if p is None or p >= k or depth >= MAX_DEPTH:
        return None
    use = role_in_words(words[p:], k - p, depth + 1)
    code = (Role.CODE, Role.PROGRAM, Role.SHELL_ARGS, Role.PROGRAM_ARGS)
    return use if use is not None and use.role in code else None
