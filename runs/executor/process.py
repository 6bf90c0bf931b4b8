"""Run a child process, stream its output, and stop it on cancel or silence.

The child gets its own process group (so a kill reaches everything it started) and dies
with the worker (PR_SET_PDEATHSIG), so a worker killed mid-iteration never leaves an agent
running that a retried iteration would race with.
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from runs.providers.base import Cancelled

HEARTBEAT_SECONDS = 0.5


@dataclass
class ProcessResult:
    exit_code: int | None
    output: str
    timed_out: bool = False


def _die_with_parent():  # runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


# The parent-death signal reaches only our direct child, not the processes an agent starts
# (a CLI's tools, a test runner): a small bash supervisor receives it and kills the whole
# process group, so nothing the agent started outlives a killed worker. The explicit `<&0`
# keeps the prompt on stdin (a background job would otherwise read /dev/null).
# What a child process (a bash step, a check, an agent CLI) may see of the worker's own
# environment. The worker holds secrets (DATABASE_URL, SECRET_KEY, every provider's key):
# a child gets these names, the run's values passed in `env`, and the names a provider kind
# declares for itself (see `inherited`), never the rest.
BASE_CHILD_ENV = frozenset(
    ["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM"]
)


def child_env(env: dict[str, str] | None) -> dict[str, str]:
    from django.conf import settings

    allowed = BASE_CHILD_ENV | frozenset(settings.LOOP_CHILD_ENV)
    base = {k: v for k, v in os.environ.items() if k in allowed or k.startswith("LC_")}
    return {**base, **(env or {})}


def inherited(*names: str) -> dict[str, str]:
    """The worker's values of `names`, for a provider that needs its own key or config."""
    return {name: os.environ[name] for name in names if name in os.environ}


SUPERVISOR = ["bash", "-c", 'trap "kill -KILL 0" TERM; "$@" <&0 & wait $!', "loop-agent"]


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_process(
    argv: list[str],
    *,
    cwd: str,
    on_chunk: Callable[[str], None],
    stdin_text: str | None = None,
    env: dict[str, str] | None = None,
    idle_timeout: float | None = None,
    timeout: float | None = None,
    busy: Callable[[], bool] | None = None,
) -> ProcessResult:
    """Run `argv`; every output chunk goes to `on_chunk`, which is also called with "" as a
    heartbeat at least every HEARTBEAT_SECONDS and may raise Cancelled to stop the child.
    stdout and stderr are merged, as a person watching a terminal would see them.
    While `busy()` says so (the child waits on one of the console's tools), a silent child
    is not idle."""
    proc = subprocess.Popen(
        [*SUPERVISOR, *argv],
        cwd=cwd,
        env=child_env(env),
        stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=_die_with_parent,
    )
    chunks: queue.Queue[bytes | None] = queue.Queue()

    def read():
        assert proc.stdout is not None
        while data := proc.stdout.read1(65536):
            chunks.put(data)
        chunks.put(None)

    def feed():
        try:
            proc.stdin.write(stdin_text.encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    threading.Thread(target=read, daemon=True).start()
    if stdin_text is not None:
        threading.Thread(target=feed, daemon=True).start()

    output: list[str] = []
    decoder = _Utf8Decoder()
    started = last_output = time.monotonic()
    timed_out = False
    try:
        while True:
            try:
                data = chunks.get(timeout=HEARTBEAT_SECONDS)
            except queue.Empty:
                data = b""
            if data is None:
                break
            now = time.monotonic()
            if data or (busy is not None and busy()):
                last_output = now
                text = decoder.feed(data)
                if text:
                    output.append(text)
                    on_chunk(text)
            else:
                on_chunk("")
            if idle_timeout and now - last_output > idle_timeout:
                timed_out = True
                break
            if timeout and now - started > timeout:
                timed_out = True
                break
    except BaseException:
        kill_group(proc)
        proc.wait()
        raise
    if timed_out:
        kill_group(proc)
    exit_code = proc.wait()
    tail = decoder.flush()
    if tail:
        output.append(tail)
        on_chunk(tail)
    return ProcessResult(
        exit_code=None if timed_out else exit_code, output="".join(output), timed_out=timed_out
    )


class _Utf8Decoder:
    """Decode a byte stream that may split multi-byte characters across reads."""

    def __init__(self):
        import codecs

        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)


__all__ = ["run_process", "ProcessResult", "Cancelled", "kill_group"]
