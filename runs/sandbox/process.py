"""Start a child process in its sandbox, stream its output, stop it on cancel or silence.

The one way the console starts a process for a recipe or an agent: bash and `script:`
steps, `until_bash` checks, gate commands, command agents and agent CLIs all call
`run_process` with the `Confinement` (or the agent call's `CallSpace`) they run in.

The child gets its own process group and dies with the worker (PR_SET_PDEATHSIG), so a
worker killed mid-iteration never leaves an agent running that a retried iteration would
race with. In the sandbox the child is the first process of its own PID namespace under
bubblewrap: when bubblewrap goes, everything the child started goes with it. Without the
sandbox a small bash supervisor does that job (it receives the parent-death signal and
kills the whole group). Between fork and exec the child joins its sandbox's cgroup, where
one can be made (cgroups.py), and takes its resource limits (confinement.Limits).
"""

from __future__ import annotations

import codecs
import ctypes
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from .cgroups import Group
from .confinement import Confinement
from .environment import child_env
from .mode import cannot_start
from .notice import note_unsandboxed
from .space import CallSpace

log = logging.getLogger(__name__)
HEARTBEAT_SECONDS = 0.5
# Without the sandbox: the parent-death signal reaches only our direct child, so this
# supervisor receives it and kills the whole process group. The explicit `<&0` keeps the
# prompt on stdin (a background job would otherwise read /dev/null).
SUPERVISOR = ["bash", "-c", 'trap "kill -KILL 0" TERM; "$@" <&0 & wait $!', "loop-agent"]


@dataclass
class ProcessResult:
    exit_code: int | None
    output: str
    timed_out: bool = False


def _preexec(confinement: Confinement, cgroup: Group | None) -> Callable[[], None]:
    def start() -> None:  # in the child, between fork and exec
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass
        # Into the sandbox's cgroup before bubblewrap starts: all it starts is counted there.
        held = cgroup.join() if cgroup is not None else frozenset()
        confinement.limits.apply(held_by_cgroup=held)

    return start


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def start(
    argv: list[str],
    space: CallSpace,
    env: dict[str, str] | None,
    *,
    stdin: bool,
    merge_stderr: bool = True,
) -> subprocess.Popen:
    """Popen `argv` in `space` (sandboxed when the mode says so); its stdout is a pipe, and
    its stderr too, merged into stdout unless `merge_stderr` is false."""
    confinement = space.confinement
    if space.sandboxed:
        command = space.command(argv)
    else:
        command = [*SUPERVISOR, *argv]
        note_unsandboxed(confinement.run_id)
    try:
        proc = _popen(command, space, env, stdin=stdin, merge_stderr=merge_stderr)
    except OSError as exc:
        if space.sandboxed and exc.filename == command[0]:
            raise cannot_start(command[0], exc) from exc
        raise
    finally:
        space.close_fds()
    space.started(proc.pid)
    return proc


def _popen(command, space: CallSpace, env, *, stdin: bool, merge_stderr: bool):
    confinement = space.confinement
    return subprocess.Popen(
        command,
        cwd=confinement.workdir,
        # The launcher itself starts with the child's environment only: its own
        # /proc/1/environ is readable inside the sandbox.
        env=child_env(env, home=confinement.home, sandboxed=space.sandboxed),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_preexec(confinement, space.cgroup()),
        pass_fds=space.fds,
    )


def run_process(
    argv: list[str],
    *,
    sandbox: Confinement | CallSpace,
    on_chunk: Callable[[str], None],
    stdin_text: str | None = None,
    env: dict[str, str] | None = None,
    idle_timeout: float | None = None,
    timeout: float | None = None,
    busy: Callable[[], bool] | None = None,
    on_stderr: Callable[[str], None] | None = None,
) -> ProcessResult:
    """Run `argv` in its sandbox, in the confinement's working folder; every output chunk
    goes to `on_chunk`, which is also called with "" as a heartbeat at least every
    HEARTBEAT_SECONDS and may raise Cancelled to stop the child. stdout and stderr are
    merged, as a person watching a terminal would see them, unless `on_stderr` is given:
    then stderr goes to it alone (a step's output is its stdout) and the result's `output`
    is stdout only. While `busy()` says so (the child waits on one of the console's tools),
    a silent child is not idle."""
    args = (argv, on_chunk, stdin_text, env, idle_timeout, timeout, busy, on_stderr)
    if isinstance(sandbox, CallSpace):
        return _run(sandbox, *args)
    with CallSpace(sandbox) as space:
        return _run(space, *args)


def _run(
    space, argv, on_chunk, stdin_text, env, idle_timeout, timeout, busy, on_stderr
) -> ProcessResult:
    apart = on_stderr is not None
    proc = start(argv, space, env, stdin=stdin_text is not None, merge_stderr=not apart)
    chunks = _pump(proc, stdin_text, apart)
    streams = _Streams(on_chunk, on_stderr)
    try:
        timed_out = _watch(chunks, streams, 2 if apart else 1, busy, idle_timeout, timeout)
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    if timed_out:
        kill_group(proc)
    exit_code = proc.wait()
    streams.flush()
    return ProcessResult(
        exit_code=None if timed_out else exit_code,
        output="".join(streams.output),
        timed_out=timed_out,
    )


Chunks = queue.Queue  # of (which stream, its bytes); (which stream, None) once it ends


def _pump(proc: subprocess.Popen, stdin_text: str | None, apart: bool) -> Chunks:
    """Threads that read the child's stdout (and its stderr, when `apart`) into one queue,
    and write `stdin_text` to it: the caller waits on the queue alone, never on a pipe."""
    chunks: Chunks = queue.Queue()

    def read(name, pipe):
        while data := pipe.read1(65536):
            chunks.put((name, data))
        chunks.put((name, None))

    def feed():
        try:
            proc.stdin.write(stdin_text.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=read, args=("out", proc.stdout), daemon=True).start()
    if apart:
        threading.Thread(target=read, args=("err", proc.stderr), daemon=True).start()
    if stdin_text is not None:
        threading.Thread(target=feed, daemon=True).start()
    return chunks


class _Streams:
    """The child's output decoded as it comes (a character may be split between two
    chunks): stdout kept in `output` and passed to `on_chunk`, stderr to `on_stderr`."""

    def __init__(self, on_chunk: Callable[[str], None], on_stderr: Callable[[str], None] | None):
        self.on_chunk, self.on_stderr = on_chunk, on_stderr
        self.output: list[str] = []
        self.out = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.err = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def stdout(self, data: bytes) -> None:
        if text := self.out.decode(data):
            self.output.append(text)
            self.on_chunk(text)

    def stderr(self, data: bytes) -> None:
        if text := self.err.decode(data):
            self.on_stderr(text)  # kept (bounded) by the caller, not here
        self.on_chunk("")  # a sign of life: the caller may still cancel

    def flush(self) -> None:
        """What the decoders still hold once the child has ended."""
        if tail := self.out.decode(b"", final=True):
            self.output.append(tail)
            self.on_chunk(tail)
        if self.on_stderr is not None and (err_tail := self.err.decode(b"", final=True)):
            self.on_stderr(err_tail)


def _watch(chunks: Chunks, streams: _Streams, open_streams, busy, idle_timeout, timeout) -> bool:
    """Pass the child's output on as it comes, with a heartbeat while it is silent, until
    its streams end (False) or it was silent or ran too long (True: timed out)."""
    started = last_output = time.monotonic()
    while True:
        try:
            name, data = chunks.get(timeout=HEARTBEAT_SECONDS)
        except queue.Empty:
            name, data = "out", b""
        if data is None:
            open_streams -= 1
            if not open_streams:
                return False
            continue
        now = time.monotonic()
        if name == "err":
            last_output = now
            streams.stderr(data)
        elif data or (busy is not None and busy()):
            last_output = now
            streams.stdout(data)
        else:
            streams.on_chunk("")
        if idle_timeout and now - last_output > idle_timeout:
            return True
        if timeout and now - started > timeout:
            return True
