"""Which environment variables a script receives that carry values from people or agents.

The console hands values to scripts only through the environment. Some of those variables
carry text a person typed or an agent wrote (the run's message, gate feedback, node
outputs behind ``LOOP_V_n``, a branch name an agent may have chosen); the shell checker
(``runs.engine.shell_context``) treats every spelling of them (``$X``, ``${X}``, a bare
``X`` inside arithmetic, ``X`` inside text run as code) as a value that must not become
code. Variables the console makes up itself (``ARTIFACTS_DIR``, ``WORKFLOW_ID``,
``LOOP_ITERATION``, ...) are not listed: their content is the console's own.

A feature that exports another value-carrying variable to a child process registers it
here (``register_value_name``), so scripts that spell it raw are checked the same way.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "CODE_VARIABLES",
    "VALUE_NAMES",
    "is_value_name",
    "register_value_name",
    "value_name_pattern",
]

# The names step_env (runs/executor/context.py) and the command provider export whose
# content a person or an agent controls, and the placeholders substitute_shell uses.
VALUE_NAMES: set[str] = {
    "USER_MESSAGE",
    "ARGUMENTS",
    "BASE_BRANCH",  # the work folder's git branch: an agent can name branches
    "LOOP_USER_INPUT",
    "LOOP_PREV_OUTPUT",
    "LOOP_SESSION_ID",  # reported back by the agent
}
# Patterns of whole names: substitute_shell's placeholders and per-input variables.
VALUE_NAME_PATTERNS: list[str] = [r"LOOP_V_\d+", r"INPUTS_[A-Za-z0-9_]+"]


# Variables whose value bash or the programs it starts run as code or load as a program:
# a value assigned to one of them is refused, and so is setting BASH_ENV or ENV at all in
# a script that feeds a value to a shell's standard input (BASH_ENV=/dev/stdin bash -c :).
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
    "GIT_CONFIG_PARAMETERS",
    "GIT_PROXY_COMMAND",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_SEQUENCE_EDITOR",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "PYTHONHOME",
    "PERL5LIB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_PATH",
    "JAVA_TOOL_OPTIONS",
    "DYLD_INSERT_LIBRARIES",
    "GCONV_PATH",
}


def register_value_name(name_or_pattern: str, *, pattern: bool = False) -> None:
    """Declare another exported variable (or a regex of names) as carrying a value."""
    (VALUE_NAME_PATTERNS.append if pattern else VALUE_NAMES.add)(name_or_pattern)


def value_name_pattern(extra: frozenset[str] = frozenset()) -> re.Pattern:
    """A regex matching any value name as a whole identifier (plus ``extra`` names)."""
    return _pattern(frozenset(VALUE_NAMES), tuple(VALUE_NAME_PATTERNS), extra)


@lru_cache(maxsize=64)
def _pattern(known: frozenset[str], patterns: tuple[str, ...], extra: frozenset[str]):
    names = sorted(known | extra, key=len, reverse=True)
    alternatives = [re.escape(n) for n in names] + list(patterns)
    return re.compile(r"(?<![A-Za-z0-9_])(?:" + "|".join(alternatives) + r")(?![A-Za-z0-9_])")


def is_value_name(name: str, extra: frozenset[str] = frozenset()) -> bool:
    if name in VALUE_NAMES or name in extra:
        return True
    return any(re.fullmatch(p, name) for p in VALUE_NAME_PATTERNS)
