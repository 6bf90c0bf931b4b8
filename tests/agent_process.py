"""Processes started the way the console starts an agent's: in a call's sandbox space, with
the child environment. Tests of the tool channel use them: the channel answers only the
process tree of the call it belongs to."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from runs.agent_tools.serve import RELAY
from runs.sandbox import CallSpace, for_run
from runs.sandbox.process import start


@contextmanager
def call_space(workdir: Path, run_id: int | None = None):
    with CallSpace(for_run(run_id, workdir)) as space:
        yield space


def in_space(space, argv: list[str], env: dict, stdin: str | None = None):
    """Run `argv` in `space`; a CompletedProcess with stdout and stderr apart."""
    proc = start(argv, space, env, stdin=stdin is not None, merge_stderr=False)
    out, err = proc.communicate(stdin.encode() if stdin is not None else None, timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())


def relay(space, env: dict, *words: str, stdin: str | None = None):
    """The tools relay (`$LOOP_TOOL_CMD` and friends) run by the call's agent."""
    return in_space(space, [sys.executable, space.relay_path(RELAY), *words], env, stdin)


def shell(space, env: dict, script: str):
    """A line of the agent's shell."""
    return in_space(space, ["bash", "-c", script], env)


def processes_in(folder: Path) -> list[int]:
    """Host PIDs of the processes working in `folder` (their current directory is in it):
    what a cancelled agent must leave none of."""
    folder = folder.resolve()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cwd = Path(os.readlink(f"/proc/{entry}/cwd"))
        except OSError:
            continue
        if cwd == folder or folder in cwd.parents:
            found.append(int(entry))
    return found
