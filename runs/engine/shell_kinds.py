"""The places a value can stand in a bash script, what commands do with their arguments,
and what to write instead of the unsafe places."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["SAFE", "Context", "Finding", "Notice", "Role", "Use", "explain"]


class Role:
    """What a command does with one of its arguments (runs.engine.shell_commands)."""

    CODE = "code"
    PROGRAM = "program"  # an interpreter's program: code, but not bash
    NAME = "name"
    ARITH = "arith"
    COMMAND = "command"
    SHELL_ARGS = "shell args"  # positional parameters of `sh -c CODE`: code decides
    PROGRAM_ARGS = "program args"  # data for an interpreter's program: the program decides
    RUN_OPTION = "run option"  # an option or setting the program runs as a command
    UNKNOWN = "unknown"  # an argument of a command the checker cannot name


@dataclass(frozen=True)
class Use:
    """A role, and for SHELL_ARGS, PROGRAM and PROGRAM_ARGS the program text the value
    reaches (None when it is not static) and its language (`bash`, `python`, `awk`, ...)."""

    role: str
    program: str | None = None
    language: str = ""


class Context(Enum):
    BARE = "bare"
    DQUOTE = "double quotes"
    HEREDOC = "an unquoted heredoc"
    COMMENT = "a comment"
    SQUOTE = "single quotes"
    QHEREDOC = "a quoted heredoc"
    ESCAPED = "an escaped reference"
    ARITH = "arithmetic"
    SUBSCRIPT = "an array subscript"
    EVAL = "text run as code (eval, sh -c, source, trap, a script fed to a shell)"
    PROGRAM = "the program text of an interpreter (python -c, perl -e, awk, sed)"
    NAME = "a place bash reads as a variable name (printf -v, read, declare, test -v, ${!x})"
    COMMAND = "the name of the command to run"
    CODE_VARIABLE = "a variable bash or a program runs as code (PS4, BASH_ENV, PATH, ...)"
    RUN_OPTION = (
        "an option or setting a program runs as a command (git -c alias.x=!..., git config "
        "core.pager, ssh -o ProxyCommand=..., rsync -e, tar --to-command, ...)"
    )
    RUNNER = (
        "data handed to a program that also runs text as code (exec, eval, system, a "
        "subprocess, ...), or whose program the checker cannot read"
    )
    UNKNOWN = (
        'an argument of a command whose name the checker cannot read ($cmd, "$SHELL", '
        "${b}sh): it may be a shell or eval"
    )
    UNPARSED = "script text the checker cannot parse as bash"


SAFE = frozenset({Context.BARE, Context.DQUOTE, Context.HEREDOC, Context.COMMENT})

SUGGESTIONS = {
    Context.SQUOTE: "single quotes keep text literal; write the reference bare or inside "
    "double quotes",
    Context.QHEREDOC: "a quoted heredoc (<<'EOF') keeps its text literal; use an unquoted "
    "heredoc (<<EOF) to include the value",
    Context.ESCAPED: "remove the backslash, or write the text without '$'",
    Context.ARITH: "bash evaluates arithmetic operands as code (a[$(cmd)]), even a bare "
    "variable name; compare numbers with test, which does not: "
    '[ "$REF" -gt 3 ], or check the value and use the checked copy: '
    "[[ $REF =~ ^[0-9]+$ ]] && n=${BASH_REMATCH[0]} && (( n + 1 ))",
    Context.SUBSCRIPT: "array subscripts are arithmetic; use an associative array "
    '(declare -A map) and a quoted key: echo "${map[$REF]}"',
    Context.EVAL: "a value must not become script text; pass it as data instead: "
    'bash -c \'printf "%s\\n" "$1"\' _ $REF, or an environment variable the program '
    "reads (python -c 'import os; print(os.environ[\"USER_MESSAGE\"])')",
    Context.PROGRAM: "a value must not become program text; pass it as an argument or an "
    "environment variable the program reads: "
    "python3 -c 'import os, sys; print(sys.argv[1])' $REF",
    Context.NAME: "bash evaluates the subscript of a variable name (a[$(cmd)]); name the "
    'variable yourself and pass the value as data: printf -v out "%s" $REF',
    Context.COMMAND: "a value must not choose the program to run; name the program and pass "
    "the value as its argument",
    Context.CODE_VARIABLE: "these variables are run or loaded as code; set them from text "
    "you write, never from a value",
    Context.RUN_OPTION: "write the option or setting yourself; give the value to the program "
    "where it is data (an argument after --, a file it reads)",
    Context.RUNNER: "the checker cannot tell that the program keeps the value away from "
    "exec/eval/system; read it in a program that does not run text, or move the code to a "
    "`script:` node",
    Context.UNKNOWN: "name the program in the script text (bash, python3, ./tool.sh, "
    '"$ARTIFACTS_DIR/tool.sh") so the checker can see what it does with the value',
    Context.UNPARSED: "fix the bash syntax there (the checker reads scripts with a bash "
    "parser and refuses values in what it cannot read)",
}


def explain(ref: str, context: Context, *, where: str = "") -> str:
    """Why a reference in ``context`` is refused and what to write instead."""
    at = f" ({where})" if where else ""
    return f"{ref} is inside {context.value}{at}, where no substitution is safe: " + SUGGESTIONS[
        context
    ].replace("$REF", ref)


@dataclass(frozen=True)
class Finding:
    """A place where a value would become code: the recipe is refused."""

    line: int
    text: str  # the reference or variable as written
    context: Context
    where: str = ""

    @property
    def explanation(self) -> str:
        return explain(self.text, self.context, where=self.where)


@dataclass(frozen=True)
class Notice:
    """A place worth a second look (a warning): the recipe still validates."""

    line: int
    text: str
    message: str

    @property
    def explanation(self) -> str:
        return f"{self.text} {self.message}"
