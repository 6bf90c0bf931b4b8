"""Commands that run another command: `env`, `timeout`, `sudo`, `xargs`, `coproc`, ...

The checker looks through a wrapper to the command it runs (`timeout 5 bash -c CODE` is
`bash -c CODE`). Some wrappers run a string as code themselves (`env -S`, `flock -c`,
`sudo -s`), and `su`, `runuser` and `script` hand their arguments to a shell: a value
anywhere among their arguments is code (their option parsers also read a value that starts
with `-`, clusters such as `-qc` included). The tables below are the whole list.
"""

from __future__ import annotations

import re

from .shell_kinds import Role
from .shell_names import CODE_VARIABLES
from .shell_tree import Node, program_name, static_text

__all__ = ["SHELL_HANDOFF", "WRAPPERS", "exec_segments", "is_option", "leading_text", "unwrap"]

# wrapper -> (options that take a value, operands before the wrapped command)
WRAPPERS: dict[str, tuple[set[str], int]] = {
    "env": ({"-u", "--unset", "-C", "--chdir"}, 0),
    "exec": ({"-a"}, 0),
    "command": (set(), 0),
    "builtin": (set(), 0),
    "coproc": (set(), 0),
    "busybox": (set(), 0),
    "nohup": (set(), 0),
    "setsid": (set(), 0),
    "time": (set(), 0),
    "nice": ({"-n", "--adjustment"}, 0),
    "timeout": ({"-s", "--signal", "-k", "--kill-after"}, 1),
    "stdbuf": ({"-i", "-o", "-e"}, 0),
    "sudo": ({"-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R"}, 0),
    "doas": ({"-u", "-C"}, 0),
    "pkexec": ({"--user"}, 0),
    "chroot": ({"--userspec", "--groups"}, 1),
    "ionice": ({"-c", "-n", "-p", "-t"}, 0),
    "taskset": (set(), 1),
    "chrt": (set(), 1),
    "prlimit": ({"-p", "--pid"}, 0),
    "flock": ({"-w", "--timeout", "-E", "--conflict-exit-code"}, 1),
    "unshare": (
        {"-S", "--setuid", "-G", "--setgid", "-R", "--root", "-w", "--wd"}
        | {"--map-user", "--map-group", "--map-users", "--map-groups", "--propagation"}
        | {"--setgroups"},
        0,
    ),
    "nsenter": ({"-t", "--target", "-S", "--setuid", "-G", "--setgid"}, 0),
    "runuser": ({"-u", "--user", "-g", "--group", "-G", "--supp-group", "-w"}, 0),
    "xargs": (
        {"-I", "-L", "-n", "-P", "-d", "-E", "-s", "-a", "--delimiter", "--max-args"}
        | {"--max-procs", "--arg-file"},
        0,
    ),
}
# wrapper -> options whose value is code (env -S splits a string into a command line)
WRAPPER_CODE_OPTIONS = {"env": {"-S", "--split-string"}, "flock": {"-c", "--command"}}
# wrapper -> option letters that hand the wrapped command line to a shell (sudo -s CMD)
WRAPPER_SHELL_LETTERS = {"sudo": {"s", "i"}}
WRAPPER_SHELL_OPTIONS = {"sudo": {"--shell", "--login"}}
# Commands that hand their arguments to a shell (or run them as command lines later, on a
# terminal server): every value among them is code.
SHELL_HANDOFF = {"su", "runuser", "script", "sg", "tmux", "screen"}
FIND_EXEC = {"-exec", "-execdir", "-ok", "-okdir"}
_ASSIGNMENT_WORD = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\+?=")


def is_option(word: Node) -> bool:
    value = static_text(word)
    return value is not None and len(value) > 1 and value[0] in "-+" and value != "--"


def leading_text(word: Node) -> str:
    """The static start of a word (`NAME=` of `NAME="$x"`), "" when it starts dynamic."""
    whole = static_text(word)
    if whole is not None:
        return whole
    if word.type == "concatenation" and word.named_children:
        first = word.named_children[0]
        return static_text(first) or (leading_text(first) if first.type == "string" else "")
    if word.type == "string" and word.named_children:
        return static_text(word.named_children[0]) or ""
    return ""


def _code_option(lead: str, options: set[str]) -> bool:
    """`-c`, `--command=...`, or a cluster of short options holding one (`-xc`, `-c"$x"`)."""
    if lead in options or any(lead.startswith(o + "=") for o in options if o[:2] == "--"):
        return True
    letters = {o[1] for o in options if len(o) == 2}
    return lead[:1] == "-" and lead[1:2] != "-" and bool(letters & set(lead[1:]))


def _joined(lead: str, options: set[str], word: Node) -> bool:
    """Whether the option word carries its own value (`--command=X`, `-cX`, `-c"$x"`)."""
    if static_text(word) is None or "=" in lead:
        return True
    if lead in options:
        return False
    letters = {o[1] for o in options if len(o) == 2}
    cut = next((i for i, ch in enumerate(lead) if i and ch in letters), len(lead))
    return cut + 1 < len(lead)


def _runs_shell(name: str, lead: str) -> bool:
    if lead in WRAPPER_SHELL_OPTIONS.get(name, ()):
        return True
    letters = WRAPPER_SHELL_LETTERS.get(name, set())
    return lead[:1] == "-" and lead[1:2] != "-" and bool(letters & set(lead[1:]))


def unwrap(words: list[Node]) -> tuple[int, dict[int, str]]:
    """Index of the command a wrapper chain runs, and wrapper words with a role of their own
    (an `env NAME=value` of a code variable, an `env -S` or `flock -c` string, the command
    line of `sudo -s`). The index is len(words) when the wrapper runs a string itself."""
    roles: dict[int, str] = {}
    i = 0
    while i < len(words):
        name = program_name(words[i])
        if name not in WRAPPERS or not _wraps(name, words[i + 1 :]):
            return i, roles
        takes_value, operands = WRAPPERS[name]
        code_options = WRAPPER_CODE_OPTIONS.get(name, set())
        i += 1
        for part in range(2):  # options, then (after the operands) flock's FILE -c CMD
            while i < len(words):
                lead = leading_text(words[i])
                if static_text(words[i]) == "--":
                    i += 1
                    break
                if code_options and _code_option(lead, code_options):
                    joined = _joined(lead, code_options, words[i])
                    roles[i if joined else i + 1] = Role.CODE
                    return len(words), roles
                if _runs_shell(name, lead):
                    roles.update({n: Role.CODE for n in range(i + 1, len(words))})
                    return len(words), roles
                if is_option(words[i]) or (lead[:1] == "-" and static_text(words[i]) is None):
                    i += 2 if static_text(words[i]) in takes_value else 1
                    continue
                match = _ASSIGNMENT_WORD.match(lead)
                if name == "env" and match:
                    if match.group(1) in CODE_VARIABLES:
                        roles[i] = Role.CODE
                    i += 1
                    continue
                break
            if part or not operands:
                break
            i += operands
    return i, roles


def _wraps(name: str, args: list[Node]) -> bool:
    """`command -v NAME` looks a name up; `runuser -u USER -- CMD` runs a command, while
    `runuser USER -c CMD` hands it to a shell (SHELL_HANDOFF)."""
    if name == "command":
        return not args or static_text(args[0]) not in ("-v", "-V")
    if name != "runuser":
        return True
    for word in args:
        lead = leading_text(word)
        if lead in ("-u", "--user") or lead.startswith("--user="):
            return True
        if not lead.startswith("-"):
            return False
    return False


def exec_segments(words: list[Node]) -> list[tuple[int, int]]:
    """`find ... -exec CMD ARGS ;` (and -execdir, -ok, -okdir): (first, end) word indexes of
    each command find runs."""
    segments = []
    i = 0
    while i < len(words):
        if static_text(words[i]) in FIND_EXEC:
            first = i + 1
            end = first
            while end < len(words) and static_text(words[end]) not in (";", "+"):
                end += 1
            segments.append((first, end))
            i = end
        i += 1
    return segments
