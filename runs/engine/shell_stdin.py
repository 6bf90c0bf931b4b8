"""What a command does with what reaches its standard input (a pipe, a heredoc, a
herestring, a redirect): whether it runs it as code.

A shell with no script named runs its input, and so do `source /dev/stdin`, an interpreter
with no program named (`python3`, `perl -`), a program whose program text runs text
(`awk '{ system($0) }'`, `sed e`), `at`/`batch`/`crontab`, an SQL shell (`sqlite3`,
`psql`, `mysql`: their input holds commands that run programs, `.shell`, `\\!`),
`make -f -`, `ssh HOST` with no command, `su`/`script`, a shell whose `sh -c` code reads its
input (`bash -c 'source /dev/stdin'`), any shell when BASH_ENV or ENV is set (it may name
/dev/stdin), and a command the checker cannot name. The shell checker then treats every
value in the pipeline or redirect as code (`runs.engine.shell_rules`).
"""

from __future__ import annotations

from .shell_commands import (
    ARGUMENT_RUNNERS,
    CODE_RUNNERS,
    INTERPRETERS,
    MAKES,
    SHELLS,
    SQL_SHELLS,
    awk_program,
    interpreter_parts,
    shell_options,
    ssh_command,
)
from .shell_programs import language_of, runs_text
from .shell_tree import Node, command_words, parse, program_name, query, static_text
from .shell_wrappers import SHELL_HANDOFF, is_option, leading_text, unwrap

__all__ = ["STDIN_PATHS", "reads_code_from_stdin", "stdin_program_language"]

STDIN_PATHS = {"-", "/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"}
# Programs that run what reaches their standard input as commands (now or later); SQL
# shells read SQL and their own commands there, some of which run programs.
STDIN_RUNNERS = {"at", "batch", "psql", "mysql", "mariadb"} | SQL_SHELLS
MAKEFILE_OPTIONS = {"-f", "--file", "--makefile"}
MAX_DEPTH = 3


def reads_code_from_stdin(command: Node, startup_env: bool = False) -> bool:
    """Whether what reaches this command's standard input is run as code: a shell or an
    interpreter with no program named, `source /dev/stdin`, xargs running a shell, a shell
    whose BASH_ENV or ENV is set (it may be /dev/stdin), a program that runs text (awk
    '{ system($0) }'), a command the checker cannot name."""
    if command.type != "command":
        return False
    for child in command.children:
        if child.type == "variable_assignment":
            name = child.child_by_field_name("name")
            startup_env = startup_env or (name is not None and name.text in (b"BASH_ENV", b"ENV"))
    return _reads_code(command_words(command), startup_env, 0)


def _reads_code(words: list[Node], startup_env: bool, depth: int) -> bool:
    start, _ = unwrap(words)
    if start >= len(words):
        return False
    name = program_name(words[start])
    if name is None:
        return True
    before = words[:start]
    startup_env = startup_env or any(
        leading_text(w).startswith(("BASH_ENV=", "ENV=")) for w in before
    )
    args = words[start + 1 :]
    language = language_of(name)
    if any(program_name(w) == "xargs" for w in before):
        if name in SHELLS | CODE_RUNNERS | ARGUMENT_RUNNERS or language in INTERPRETERS:
            return True
    if name in SHELLS:
        code_mode, first = shell_options(args)
        if startup_env:
            return True
        if code_mode:
            code = static_text(args[first]) if first < len(args) else None
            return code is None or _code_reads_stdin(code, startup_env, depth + 1)
        flags = [static_text(a) for a in args[:first]]
        return "-s" in flags or first >= len(args) or static_text(args[first]) in STDIN_PATHS
    if name in SHELL_HANDOFF or name in STDIN_RUNNERS:
        return True
    if name in MAKES:
        return _makefile_from_stdin(args)
    if name == "crontab":
        operands = [a for a in args if not is_option(a)]
        return not operands or static_text(operands[0]) in STDIN_PATHS
    if name == "ssh":
        return ssh_command(args) >= len(args)  # no command after the host
    if name in ("source", "."):
        return bool(args) and static_text(args[0]) in STDIN_PATHS
    if language == "sed":
        index, _ = awk_program(args, True)
        after_e = [
            n for n in range(1, len(args)) if static_text(args[n - 1]) in ("-e", "--expression")
        ]
        programs = [static_text(args[n]) for n in [*after_e, index] if n is not None]
        return any(runs_text(language, program) for program in programs)
    if language == "awk":
        index, given = awk_program(args, False)
        program = static_text(args[index]) if index is not None else None
        return not given and runs_text(language, program)
    if language in INTERPRETERS:
        kind, index, program = interpreter_parts(language, args)
        if kind == "program":
            return runs_text(language, program)
        return index >= len(args) or static_text(args[index]) in STDIN_PATHS
    return False


def _makefile_from_stdin(args: list[Node]) -> bool:
    """`make -f -` (`-f/dev/stdin`, `-sf -`, `--file=-`): its makefile is its standard input;
    a makefile named by an expansion may be too."""
    for n, word in enumerate(args):
        lead, value = leading_text(word), static_text(word)
        short = lead[:1] == "-" and lead[1:2] != "-" and "f" in lead
        if lead.startswith(("--file=", "--makefile=")):
            named = lead.split("=", 1)[1] if value is not None else None
        elif lead in MAKEFILE_OPTIONS or (short and lead.endswith("f")):
            following = static_text(args[n + 1]) if n + 1 < len(args) else ""
            named = following if value is not None else None
        elif short:
            named = lead[lead.index("f") + 1 :] if value is not None else None
        else:
            continue
        if named is None or named in STDIN_PATHS:
            return True
    return False


def stdin_program_language(command: Node) -> str:
    """`python3`, `perl -`, `node` with no program named read their program from standard
    input (a heredoc, a herestring): its language, "" for anything else."""
    if command.type != "command":
        return ""
    words = command_words(command)
    start, _ = unwrap(words)
    if start >= len(words) or (name := program_name(words[start])) is None:
        return ""
    language = language_of(name)
    if language not in INTERPRETERS:
        return ""
    args = words[start + 1 :]
    kind, index, _ = interpreter_parts(language, args)
    reads = kind == "file" and (index >= len(args) or static_text(args[index]) in STDIN_PATHS)
    return language if reads else ""


def _code_reads_stdin(code: str, startup_env: bool, depth: int) -> bool:
    """Whether a static `sh -c` string runs what reaches its standard input."""
    if depth > MAX_DEPTH:
        return True
    root = parse(code.encode())
    for command in query(root, "(command) @c"):
        words = command_words(command)
        if words and program_name(words[0]) in CODE_RUNNERS - {"trap"}:
            if any(static_text(w) is None for w in words[1:]):
                return True
        if _reads_code(words, startup_env, depth):
            return True
    return False
