"""Start everything on one machine: (embedded Redis), the ASGI web server, one worker.

`make run` calls this. Ctrl-C stops every process it started.
"""

import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from console import embedded


class Command(BaseCommand):
    help = "Run the web server and a worker together (and the embedded broker when no REDIS_URL)."

    def add_arguments(self, parser):
        parser.add_argument("--host", default=os.getenv("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.getenv("PORT", "8000")))
        parser.add_argument("--concurrency", type=int, default=4)

    def handle(self, *args, **options):
        procs: list[tuple[str, subprocess.Popen]] = []
        stopping = False

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
            python = sys.executable
            worker = subprocess.Popen(
                [
                    python,
                    "-m",
                    "celery",
                    "-A",
                    "console",
                    "worker",
                    "-B",
                    "--loglevel",
                    "INFO",
                    "--concurrency",
                    str(options["concurrency"]),
                    "-s",
                    str(settings.LOOP_DATA_DIR / "celerybeat-schedule"),
                ],
                start_new_session=True,
            )
            procs.append(("worker", worker))
            web = subprocess.Popen(
                [
                    python,
                    "-m",
                    "uvicorn",
                    "console.asgi:application",
                    "--host",
                    options["host"],
                    "--port",
                    str(options["port"]),
                    "--log-level",
                    "warning",
                ],
                start_new_session=True,
            )
            procs.append(("web", web))
            url = f"http://{options['host']}:{options['port']}/"
            self.stdout.write(self.style.SUCCESS(f"\nLoop Console is running at {url}"))
            self.stdout.write(
                "log in with the account printed when it was first created (another: manage.py createsuperuser)"
            )
            self.stdout.write("press Ctrl-C to stop\n")
            while not stopping:
                for name, proc in procs:
                    if proc.poll() is not None:
                        self.stderr.write(f"{name} exited with status {proc.returncode}; stopping")
                        stopping = True
                time.sleep(0.3)
        finally:
            for _name, proc in reversed(procs):
                if proc.poll() is None:
                    os.killpg(proc.pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            for _name, proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
            self.stdout.write("stopped")
