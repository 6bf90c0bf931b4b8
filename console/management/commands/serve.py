"""Start everything on one machine: (embedded Redis), the ASGI web server, one worker.

`make run` calls this (`make run PORT=8001` picks the port). The port is bound first, by
this process, and handed to the web server as an open socket: a port in use fails at once
with a clear message and starts nothing, and the URL is printed only once the server
answers on it. Ctrl-C (or any child dying) stops every process it started; a failure
exits non-zero.
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from console import embedded
from console.secrets import protect_process

READY_TIMEOUT = 90
STOP_TIMEOUT = 10


def bind(host: str, port: int) -> socket.socket:
    """The listening socket the web server will use, or a CommandError saying why not."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise CommandError(
                f"Port {port} on {host} is already in use (another Loop Console?). "
                f"Stop it, or choose another port: make run PORT={port + 1}"
            ) from None
        raise CommandError(f"Cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


def proxy_options() -> list[str]:
    """uvicorn's options for the client address and scheme: by default it believes
    X-Forwarded-For and X-Forwarded-Proto from any peer on 127.0.0.1, so a local client could
    sign in under any address it names. Only behind a proxy (BEHIND_PROXY) are they read,
    from the peers FORWARDED_ALLOW_IPS names (uvicorn's own setting; default 127.0.0.1)."""
    return ["--proxy-headers"] if settings.BEHIND_PROXY else ["--no-proxy-headers"]


def base_url(host: str, port: int) -> str:
    """Where a person reaches a console listening on host:port (a wildcard address is
    reached on this machine's loopback)."""
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class Command(BaseCommand):
    help = "Run the web server and a worker together (and the embedded broker when no REDIS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.getenv("HOST", "127.0.0.1"))
        parser.add_argument(
            "--port",
            type=int,
            default=int(os.getenv("PORT") or 8000),
            help="Port of the web server (default: $PORT, else 8000)",
        )
        parser.add_argument("--concurrency", type=int, default=4)

    def handle(self, *args, **options):
        host, port = options["host"], options["port"]
        listener = bind(host, port)  # before anything starts: a busy port leaves nothing behind
        # This process holds every secret of the environment it was started with: same-user
        # processes (an unsandboxed step) must not read them from /proc/<pid>/environ.
        protect_process()
        if not os.environ.get("LOOP_BASE_URL"):
            # Links in notifications name the port this console listens on (the web server
            # and the worker both build them); a LOOP_BASE_URL of your own is kept as it is.
            os.environ["LOOP_BASE_URL"] = base_url(host, port)
        procs: list[tuple[str, subprocess.Popen]] = []
        stopping = False
        failed = ""

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        try:
            if settings.EMBEDDED_BROKER:
                broker = embedded.start()
                if broker:
                    procs.append(("redis", broker))
                self.stdout.write(f"broker: embedded Redis on {settings.EMBEDDED_REDIS_SOCKET}")
            procs.append(("worker", self._worker(options["concurrency"])))
            procs.append(("web", self._web(listener)))
            listener.close()  # the web server holds its own copy now
            url = f"http://{host}:{port}/"
            deadline = time.monotonic() + READY_TIMEOUT
            while not stopping and not self._answers(url):
                failed = self._dead(procs)
                if not failed and time.monotonic() > deadline:
                    failed = f"the web server did not answer on {url} within {READY_TIMEOUT} s"
                if failed:
                    break
                time.sleep(0.2)
            if not stopping and not failed:
                self.stdout.write(self.style.SUCCESS(f"\nLoop Console is running at {url}"))
                self.stdout.write(
                    "log in with the account printed when it was first created "
                    "(another: manage.py createsuperuser)"
                )
                self.stdout.write("press Ctrl-C to stop\n")
            while not stopping and not failed:
                failed = self._dead(procs)
                time.sleep(0.3)
        finally:
            listener.close()
            self._stop_all(procs)
            self.stdout.write("stopped")
        if failed:
            raise CommandError(failed)

    def _worker(self, concurrency: int) -> subprocess.Popen:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "console",
                "worker",
                "-B",  # beat, reading its schedule from the database (CELERY_BEAT_SCHEDULER)
                "--loglevel",
                "INFO",
                "--concurrency",
                str(concurrency),
            ],
            start_new_session=True,
        )

    def _web(self, listener: socket.socket) -> subprocess.Popen:
        fd = listener.fileno()
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "console.asgi:application",
                "--fd",
                str(fd),
                "--log-level",
                "warning",
                *proxy_options(),
            ],
            pass_fds=(fd,),
            start_new_session=True,
        )

    @staticmethod
    def _answers(url: str) -> bool:
        try:
            with urllib.request.urlopen(url + "healthz", timeout=2) as response:  # noqa: S310
                return response.status in (200, 503)
        except urllib.error.HTTPError as exc:
            return exc.code == 503  # up, but the database or broker is not (it says which)
        except OSError:
            return False

    @staticmethod
    def _dead(procs) -> str:
        for name, proc in procs:
            if proc.poll() is not None:
                return f"{name} exited with status {proc.returncode}; stopped everything"
        return ""

    @staticmethod
    def _stop_all(procs) -> None:
        """The web server and the worker first, then the broker they talk to: a worker whose
        broker went away while it shut down fills the screen with tracebacks."""
        Command._stop([p for p in procs if p[0] != "redis"])
        Command._stop([p for p in procs if p[0] == "redis"])

    @staticmethod
    def _stop(procs) -> None:
        for name, proc in reversed(procs):
            if proc.poll() is None:
                try:
                    if name == "worker":
                        # Its main process alone: a warm shutdown lets a task that is about
                        # to end finish; its pool processes are not killed under it.
                        os.kill(proc.pid, signal.SIGTERM)
                    else:
                        os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + STOP_TIMEOUT
        for _name, proc in procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # A task still at work (an agent, a long step) is stopped here, quietly; the
                # sweep gives its work to a worker after the next start. Nothing is left.
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        # The leader may be gone while members of its group live on (a pool process, the
        # worker's beat): the group goes too, so nothing outlives `make run`.
        for _name, proc in procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
