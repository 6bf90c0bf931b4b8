"""Shared plumbing for CLI agents that print one JSON event per line (Claude Code, Codex).

Every call runs in its sandbox (`agent_call`): the call's private folder holds what the
CLI must read (its MCP configuration, an output schema) and the console's tool socket.
The child's output is split into lines; JSON lines go to the provider's event handler
(which streams the text worth showing), anything else (stderr, warnings) is kept for the
error message. Heartbeats pass straight through, so cancel and idle timeout work as for
any command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from runs.agent_tools import busy_check
from runs.agent_tools.serve import serving
from runs.sandbox import CallSpace, ProcessResult, inherited, may_show, run_process

from .base import AgentRequest, OnChunk, ProviderError

TRANSIENT_HINTS = re.compile(
    r"rate.?limit|overloaded|\b429\b|\b5\d\d\b|timed? ?out|connection (reset|refused|error)|"
    r"temporarily unavailable|try again",
    re.I,
)


def program_argv(provider: str, command: str, default_program: str) -> list[str]:
    """The configured command (a path, or a program on PATH, with fixed arguments)."""
    argv = shlex.split(command) if command and command.strip() else [default_program]
    program = argv[0]
    found = shutil.which(program) if os.sep not in program else program
    if not found or not os.path.exists(found):
        raise ProviderError(
            f"provider '{provider}': the program `{program}` was not found "
            f"(install it on the worker's PATH, or set `command:` to its full path)"
        )
    if not os.access(found, os.X_OK):
        raise ProviderError(f"provider '{provider}': `{found}` is not executable")
    return argv


def program_files(argv: list[str]) -> tuple[str, ...]:
    """The folders the sandbox shows read-only so that the program can run: its own
    folder, and for an npm package its whole `node_modules` tree (a CLI's launcher links
    into it, and its dependencies sit beside it)."""
    found = shutil.which(argv[0]) if os.sep not in argv[0] else argv[0]
    if not found:
        return ()
    folders = {str(Path(found).absolute().parent)}
    real = Path(found).resolve()
    parts = real.parts
    if "node_modules" in parts:
        folders.add(str(Path(*parts[: parts.index("node_modules") + 1])))
    else:
        folders.add(str(real.parent))
    return tuple(sorted(folders))


def named_files(command: str) -> tuple[str, ...]:
    """What the sandbox shows read-only of what a command names by absolute path: the
    program it starts (`/opt/agents/run.sh`: its folder, as for an agent CLI, since a
    program may use what lies beside it) and each other file it names (`python3
    /srv/agent.py`), that file alone. Never one the sandbox hides (runs.sandbox.may_show):
    a secret file, the data folder, /proc/self/… (the worker's own)."""
    try:
        words = shlex.split(command, comments=True)
    except ValueError:
        return ()
    shown: list[str] = []
    for position, word in enumerate(words):
        if not os.path.isabs(word) or not os.path.isfile(word):
            continue
        if position == 0:
            found = [f for f in program_files([word]) if may_show(f, program_folder=True)]
        else:
            found = [word] if may_show(word) else []
        shown += [entry for entry in found if entry not in shown]
    return tuple(shown)


@contextmanager
def agent_call(
    request: AgentRequest,
    argv: list[str],
    reads: tuple[str, ...] = (),
    config_dirs: tuple[str, ...] = (),
) -> Iterator[tuple[CallSpace, dict]]:
    """The call's sandbox (where `argv` runs, reading also the folders `reads`) and, when
    the agent has tools, the tool channel's environment; both end with the block.
    `config_dirs` names environment variables of a folder the CLI keeps its configuration
    in (CLAUDE_CONFIG_DIR): when the administrator sets one, every run's agent shares that
    folder, read-write."""
    shared = tuple(value for name in config_dirs if (value := inherited(name).get(name)))
    read = tuple(dict.fromkeys((*program_files(argv), *reads)))
    confinement = request.confinement(read=read, write=shared)
    with CallSpace(confinement) as space:
        with serving(request.tools, space) as tool_env:
            yield space, tool_env


def looks_transient(message: str) -> bool:
    return bool(TRANSIENT_HINTS.search(message or ""))


class JsonLines:
    """An on_chunk for run_process that turns the byte stream into parsed events."""

    def __init__(self, on_chunk: OnChunk, on_event: Callable[[dict], None]):
        self.on_chunk = on_chunk
        self.on_event = on_event
        self.buffer = ""
        self.stray: list[str] = []

    def __call__(self, text: str) -> None:
        if not text:
            self.on_chunk("")  # heartbeat
            return
        self.buffer += text
        *complete, self.buffer = self.buffer.split("\n")
        for line in complete:
            self._line(line)

    def finish(self) -> None:
        if self.buffer:
            self._line(self.buffer)
            self.buffer = ""

    def _line(self, line: str) -> None:
        line = line.strip()
        if not line:
            return
        try:
            event = json.loads(line)
        except ValueError:
            event = None
        if isinstance(event, dict):
            self.on_event(event)
        else:
            self.stray.append(line)

    def stray_tail(self, limit: int = 1500) -> str:
        return "\n".join(self.stray)[-limit:]


def run_json_lines(
    argv: list[str],
    *,
    provider: str,
    space: CallSpace,
    prompt: str,
    env: dict[str, str],
    idle_timeout: float,
    parser: JsonLines,
    busy: Callable[[], bool] | None = None,
) -> ProcessResult:
    try:
        result = run_process(
            argv,
            sandbox=space,
            stdin_text=prompt,
            env=env,
            on_chunk=parser,
            idle_timeout=idle_timeout,
            busy=busy,
        )
    except (FileNotFoundError, PermissionError) as exc:
        raise ProviderError(f"provider '{provider}': cannot start {argv[0]!r}: {exc}") from exc
    parser.finish()
    return result


class CliAgentProvider:
    """What every agent CLI's provider shares (claude, codex, gemini, opencode): its name,
    the command to run (`default_program` unless the configuration names one), its model,
    and a call space of its own whose config folders are `config_dirs`. A subclass says
    how one call runs in it (`_run`)."""

    default_program = ""
    config_dirs: tuple[str, ...] = ()

    def __init__(self, name: str, config: dict):
        self.name = name
        self.command = config.get("command") or ""
        self.model = config.get("model")
        self.options = config

    def program(self) -> list[str]:
        return program_argv(self.name, self.command, self.default_program)

    def call_space(self, request):
        """The call's private folder and the agent tools' environment, as a context."""
        return agent_call(
            request, self.program(), named_files(self.command), config_dirs=self.config_dirs
        )

    def run_cli(self, argv: list[str], request, space, env: dict, parser):
        """The CLI's one process for this call, its JSON lines read by `parser`, quiet while
        a tool call of the agent's is at work (`busy`)."""
        return run_json_lines(
            argv,
            provider=self.name,
            space=space,
            prompt=request.prompt,
            env=env,
            idle_timeout=request.idle_timeout,
            parser=parser,
            busy=busy_check(request.tools),
        )

    def run(self, request, on_chunk):
        # Each subclass's `_run(request, on_chunk, space, tool_env)` runs the call in it.
        with self.call_space(request) as (space, tool_env):
            return self._run(request, on_chunk, space, tool_env)
