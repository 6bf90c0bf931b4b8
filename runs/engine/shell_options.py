"""Options of ordinary programs that matter to a value: the ones they run as a command, and
the ones a value could pose as.

Some options and settings take a command line (`git -c alias.x=!cmd`, `git config
core.pager`, `ssh -o ProxyCommand=`, `rsync -e`, `tar --to-command`, ...): a value there is
refused. And a value passed as a bare argument to `git`, `tar`, `rsync`, `find`, `curl`,
`wget`, `ssh` or `scp` is read as an option when it starts with `-` (`--upload-pack=...`,
`--checkpoint-action=exec=...`, `-oProxyCommand=...`): that is a warning with the fix
(write `--` first). The tables below are the whole list.
"""

from __future__ import annotations

import re

from .shell_kinds import Role
from .shell_tree import Node, static_text
from .shell_wrappers import is_option, leading_text

__all__ = ["git_role", "option_injection", "run_option_role"]

# program -> options whose value it runs as a command (or a setting that names one)
RUN_OPTIONS: dict[str, set[str]] = {
    "ssh": {"-o"},
    "scp": {"-o", "-S"},
    "sftp": {"-o", "-S"},
    "rsync": {"-e", "--rsh", "--rsync-path"},
    "tar": {"-I", "-F", "--to-command", "--use-compress-program", "--rsh-command"}
    | {"--checkpoint-action", "--info-script", "--new-volume-script"},
    "sort": {"--compress-program"},
    "zip": {"-TT", "--unzip-command"},
    "wget": {"-e", "--execute"},
    "gdb": {"-ex", "-iex", "--eval-command"},
    # SQL clients: the SQL they run may hold their own commands that run programs (`\\!`)
    "psql": {"-c", "--command"},
    "mysql": {"-e", "--execute"},
    "mariadb": {"-e", "--execute"},
    "man": {"-P", "--pager"},
    "vim": {"-c", "--cmd"},
    "vi": {"-c", "--cmd"},
    "nvim": {"-c", "--cmd"},
    "ex": {"-c", "--cmd"},
    "view": {"-c", "--cmd"},
}
PLUS_COMMANDS = {"vim", "vi", "nvim", "ex", "view", "less", "more"}  # vim +CMD, less +CMD
GIT_RUN_OPTIONS = {"--upload-pack", "--receive-pack", "--exec"}
GIT_GLOBAL_RUN = {"-c", "--config-env", "--exec-path"}
GIT_GLOBAL_VALUE = {"-C", "-c", "--config-env", "--git-dir", "--work-tree", "--namespace"}
# `git config KEY VALUE`: keys whose value git runs (or which load settings that do)
GIT_RUN_KEYS = re.compile(
    r"^(alias\..*|include\..*|includeif\..*|core\.(pager|editor|sshcommand|fsmonitor"
    r"|hookspath|gitproxy|askpass|attributesfile|excludesfile)|sequence\.editor"
    r"|credential\..*|gpg\..*|pager\..*|uploadpack\..*|.*\.(command|cmd|textconv|clean"
    r"|smudge|process|program|helper|tool|path|proxy|uploadpack|receivepack))$",
    re.IGNORECASE,
)
GIT_CONFIG_VERBS = {"get", "set", "unset", "list", "edit", "rename-section", "remove-section"}


def _is_run_option(previous: Node | None, word: Node, options: set[str]) -> bool:
    """The word is the value of a run option: `-o VALUE`, `-oVALUE`, `--rsh=VALUE`,
    `-vI VALUE` (a cluster ending in the option's letter)."""
    lead = leading_text(word)
    for option in options:
        if option[:2] == "--" and lead.startswith(option + "="):
            return True
        if len(option) == 2 and lead.startswith(option) and lead != option:
            return True
    before = static_text(previous) if previous is not None else None
    if before is None:
        return False
    if before in options:
        return True
    letters = {o[1] for o in options if len(o) == 2}
    return before[:1] == "-" and before[1:2] != "-" and before[-1:] in letters


def run_option_role(name: str, args: list[Node], j: int) -> str | None:
    if name in PLUS_COMMANDS and leading_text(args[j]).startswith("+"):
        return Role.RUN_OPTION
    options = RUN_OPTIONS.get(name)
    if options and _is_run_option(args[j - 1] if j else None, args[j], options):
        return Role.RUN_OPTION
    return None


def git_role(args: list[Node], j: int) -> str | None:
    """`git -c NAME=VALUE`, `--config-env`, `--exec-path`, `--upload-pack`, and `git config
    KEY VALUE` for a KEY git runs (aliases, pagers, editors, hooks, helpers)."""
    sub = 0
    while sub < len(args):
        value = static_text(args[sub])
        if value in GIT_GLOBAL_VALUE:
            if sub + 1 == j and value in GIT_GLOBAL_RUN:
                return Role.RUN_OPTION
            sub += 2
            continue
        if leading_text(args[sub]).startswith("-"):
            if sub == j and _is_run_option(None, args[j], GIT_GLOBAL_RUN):
                return Role.RUN_OPTION
            sub += 1
            continue
        break
    if j <= sub:
        return None
    if _is_run_option(args[j - 1], args[j], GIT_RUN_OPTIONS):
        return Role.RUN_OPTION
    if static_text(args[sub]) == "config":
        return _git_config_role(args[sub + 1 :], j - sub - 1)
    return None


def _git_config_role(args: list[Node], j: int) -> str | None:
    operands = [n for n, word in enumerate(args) if not is_option(word)]
    if operands and static_text(args[operands[0]]) in GIT_CONFIG_VERBS:
        operands = operands[1:]
    if not operands or j not in operands or j == operands[0] and len(operands) == 1:
        return None
    key = static_text(args[operands[0]])
    if j == operands[0] or key is None or GIT_RUN_KEYS.match(key):
        return Role.RUN_OPTION
    return None


# Warnings: program -> options whose next word is their value (a value there is data)
_GIT_HINT = "write --end-of-options before it: git ... --end-of-options $REF"
_DASHES = "write -- before it: {program} ... -- $REF"
_FIND_HINT = (
    "-- does not help find: refuse such a value first (case $REF in -*) exit 1;; esac) "
    "or write ./ before a relative path: find ./$REF"
)
# program -> (an option a value could pose as, the fix)
OPTION_EXAMPLES = {
    "git": ("--upload-pack=COMMAND", _GIT_HINT),
    "tar": ("--checkpoint-action=exec=COMMAND", _DASHES),
    "rsync": ("-eCOMMAND", _DASHES),
    "curl": ("-o/any/file", _DASHES),
    "wget": ("--execute=SETTING", _DASHES),
    "ssh": ("-oProxyCommand=COMMAND", _DASHES),
    "scp": ("-oProxyCommand=COMMAND", _DASHES),
    "find": ("-delete", _FIND_HINT),
}
OPTION_PROGRAMS: dict[str, set[str]] = {
    "git": (
        GIT_GLOBAL_VALUE
        | {"-m", "--message", "-F", "--file", "-b", "-B", "--branch", "-o", "--origin"}
        | {"--author", "--date", "--depth", "-X", "--strategy-option", "-s", "--strategy"}
        | {"--reference", "--template", "--onto", "--trailer", "-e", "--grep", "-n"}
        | {"--since", "--until", "--max-count", "--format", "--pretty", "-t"}
    ),
    "tar": (
        {"-f", "--file", "-C", "--directory", "-T", "--files-from", "-X", "--exclude-from"}
        | {"--exclude", "-b", "-H", "--format", "-K", "-N", "-V", "--label", "--transform"}
        | {"--owner", "--group", "--mode", "--mtime"}
    ),
    "rsync": (
        {"-e", "--rsh", "--exclude", "--include", "--filter", "-f", "--exclude-from"}
        | {"--include-from", "--files-from", "-T", "--temp-dir", "--log-file", "--chmod"}
        | {"--chown", "--rsync-path", "-B", "--port", "--password-file", "--backup-dir"}
        | {"--compare-dest", "--copy-dest", "--link-dest", "--suffix", "--timeout"}
    ),
    "curl": (
        {"-o", "--output", "-d", "--data", "--data-raw", "--data-binary", "--json", "-H"}
        | {"--data-urlencode", "--header", "-u", "--user", "-X", "--request", "-A", "-e"}
        | {"--user-agent", "--referer", "-b", "--cookie", "-c", "--cookie-jar", "-F"}
        | {"--form", "-T", "--upload-file", "-w", "--write-out", "-K", "--config", "-x"}
        | {"--proxy", "-m", "--max-time", "--connect-timeout", "--retry", "--url", "-r"}
        | {"--range", "-E", "--cert", "--key", "--cacert", "--resolve", "-D"}
        | {"--dump-header", "--oauth2-bearer"}
    ),
    "wget": (
        {"-O", "--output-document", "-o", "--output-file", "-a", "-P", "-U", "--header"}
        | {"--directory-prefix", "--user-agent", "--post-data", "--post-file", "-e", "-i"}
        | {"--execute", "--input-file", "-t", "--tries", "-T", "--timeout", "--user"}
        | {"--password", "--referer", "-B", "--base", "-l", "--level", "-A", "-R", "-D"}
    ),
    "ssh": {"-B", "-b", "-c", "-D", "-E", "-e", "-F", "-I", "-i", "-J", "-L", "-l", "-m"}
    | {"-O", "-o", "-p", "-Q", "-R", "-S", "-W", "-w"},
    "scp": {"-c", "-D", "-F", "-i", "-J", "-l", "-o", "-P", "-S", "-X"},
    "find": set(),
}


def option_guard(name: str, args: list[Node]) -> int:
    """Index of the first argument after which nothing is read as an option: `--` or
    `--end-of-options`; for find the first word of its expression (`-name VALUE` is never
    an option, and find reads `--` but still takes `-x` after it as an expression)."""
    for index, word in enumerate(args):
        if name == "find":
            if leading_text(word)[:1] in ("-", "(", "!") and static_text(word) != "--":
                return index
        elif static_text(word) in ("--", "--end-of-options"):
            return index
    return len(args)


def option_injection(name: str, args: list[Node], j: int, guard: int | None = None) -> str | None:
    """The warning for a value standing as argument `j` of `name`, where it would be read
    as an option if it starts with `-`; None when the place is safe. `guard` is
    option_guard(name, args), when the caller has it already."""
    if name not in OPTION_PROGRAMS:
        return None
    value_options = OPTION_PROGRAMS[name]
    if j > (option_guard(name, args) if guard is None else guard):
        return None
    if name != "find" and j:
        before = static_text(args[j - 1])
        letters = {o[1] for o in value_options if len(o) == 2}
        if before in value_options:
            return None
        if before and before[:1] == "-" and before[1:2] != "-" and before[-1:] in letters:
            return None
    example, hint = OPTION_EXAMPLES[name]
    return (
        f"is an argument of {name}, which reads an argument starting with '-' as an option "
        f"whatever the value holds (a value {example} would be one); " + hint.format(program=name)
    )
