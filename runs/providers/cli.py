"""Shared plumbing for CLI agents that print one JSON event per line (Claude Code, Codex).

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
from collections.abc import Callable

from runs.executor.process import ProcessResult, run_process

from .base import OnChunk, ProviderError

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
    cwd: str,
    prompt: str,
    env: dict[str, str],
    idle_timeout: float,
    parser: JsonLines,
    busy: Callable[[], bool] | None = None,
) -> ProcessResult:
    try:
        result = run_process(
            argv,
            cwd=cwd,
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
