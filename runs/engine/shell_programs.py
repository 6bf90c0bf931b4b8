"""Interpreter programs written inline (`python3 -c`, `perl -e`, awk): do they run text?

A value may reach such a program as data: in its environment (`os.environ["USER_MESSAGE"]`,
`$ENV{USER_MESSAGE}`, `ENVIRON["USER_MESSAGE"]`), as an argument (`sys.argv[1]`, `awk -v`)
or on its standard input. That is safe while the program only reads and prints it. A
program that also runs text as code (exec, eval, system, a subprocess, ...) may run the
value: the checker cannot follow data through another language, so it refuses the value
there, whatever the program does with it. The words below are the whole list, per
language; a program the checker cannot read (not static text) counts as running text.
"""

from __future__ import annotations

import re

__all__ = ["language_of", "runs_text"]

_IMPORT = r"""\s*\(?\s*(?:['"](?:child_process|vm|worker_threads|module|open3|pty)|[^'"\s(])"""
_RUNNERS: dict[str, str] = {
    "python": r"\b(?:exec|eval|compile|system|popen|Popen|subprocess|spawn\w*|exec[lv]\w*"
    r"|pty|pickle|marshal|shelve|runpy|importlib|__import__|getattr|globals|builtins"
    r"|__builtins__|interact|InteractiveConsole|InteractiveInterpreter|ctypes)\b",
    "perl": r"\b(?:eval|system|exec|qx|readpipe|open|fork|pipe)\b|`|\bdo\s*[^\s{]"
    r"|\brequire\s*[^\s\w]|\bs(\W)(?:(?!\1).)*\1(?:(?!\1).)*\1[a-z]*e",
    "ruby": r"\b(?:eval|instance_eval|class_eval|module_eval|system|exec|spawn|fork"
    r"|popen\w*|Open3|send|public_send|load|Marshal|YAML|Kernel|binding)\b|`|%x"
    r"|\brequire" + _IMPORT,
    "node": r"\b(?:eval|Function|child_process|exec\w*|spawn\w*|fork|vm|setTimeout"
    r"|setInterval|binding|Deno|Bun)\b|\b(?:require|import)" + _IMPORT,
    "php": r"\b(?:eval|assert|system|exec|shell_exec|passthru|popen|proc_open|pcntl_exec"
    r"|create_function|include|include_once|require|require_once|call_user_func\w*"
    r"|preg_replace)\b|`",
    "lua": r"\b(?:load|loadstring|loadfile|dofile|require|execute|popen)\b",
    "r": r"\b(?:eval|evalq|parse|system|system2|source|shell|pipe|do\.call)\b",
    "osascript": r"\b(?:do\s+shell\s+script|run\s+script|load\s+script)\b",
    "tcl": r"\b(?:exec|eval|open|source|spawn|system|uplevel|subst|interp|load)\b",
    "awk": r"\bsystem\s*\(|\|\s*getline|\|&|\b(?:print|printf)\b[^;{}\n]*?[^|]\|(?!\|)",
    # GNU sed: the `e` command runs the pattern space, `s///e` runs the result
    "sed": r"(?:^|[;{}\n/$!0-9])\s*e(?:\s|;|}|$)|\bs(\W)(?:(?!\1).)*\1(?:(?!\1).)*\1[^;}\s]*e",
}
_COMPILED = {language: re.compile(pattern) for language, pattern in _RUNNERS.items()}

# program name (version digits stripped) -> language
_LANGUAGES = {
    "python": "python",
    "pypy": "python",
    "perl": "perl",
    "ruby": "ruby",
    "node": "node",
    "nodejs": "node",
    "deno": "node",
    "bun": "node",
    "php": "php",
    "lua": "lua",
    "luajit": "lua",
    "Rscript": "r",
    "osascript": "osascript",
    "tclsh": "tcl",
    "wish": "tcl",
    "expect": "tcl",
    "awk": "awk",
    "gawk": "awk",
    "mawk": "awk",
    "nawk": "awk",
    "sed": "sed",
    "gsed": "sed",
}


def language_of(name: str) -> str:
    """`python3.11` -> `python`; "" for a program that is not an interpreter listed here."""
    return _LANGUAGES.get(name) or _LANGUAGES.get(re.sub(r"[0-9.]+$", "", name), "")


def runs_text(language: str, program: str | None) -> bool:
    """Whether ``program`` (in ``language``) contains a way to run text as code; a program
    the checker cannot read (None) or a language without a list counts as one."""
    if program is None or language not in _COMPILED:
        return True
    return bool(_COMPILED[language].search(program))
