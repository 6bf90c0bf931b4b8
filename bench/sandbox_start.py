"""What the sandbox costs per child process: `true` started N times through
`runs.sandbox.run_process`, unsandboxed, sandboxed without the network (a new network
namespace: the default for steps) and sandboxed with it (agents), and the floor: a bare
`subprocess.run(["true"])`.

    .venv/bin/python -m bench.sandbox_start [--starts 200]

Prints milliseconds per start (median and 90th percentile) and each row's ratio to the
floor. Compare the rows of one run with each other (the machine may be busy); the
machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django

django.setup()

from django.conf import settings  # noqa: E402

from runs.sandbox import for_run, run_process  # noqa: E402
from runs.sandbox.mode import status  # noqa: E402


def timed(starts: int, start_one) -> list[float]:
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        start_one()
        times.append((time.perf_counter() - began) * 1000)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=200)
    starts = parser.parse_args().starts
    if not status().active:
        raise SystemExit(f"the sandbox is not usable here: {status().detail}")
    workdir = tempfile.mkdtemp(prefix="bench-sandbox-")

    def through(mode: str, network: bool):
        def start_one():
            settings.LOOP_SANDBOX = mode
            result = run_process(
                ["true"], sandbox=for_run(None, workdir, network=network), on_chunk=lambda _: None
            )
            assert result.exit_code == 0, result.output

        return start_one

    rows = [
        ("floor: subprocess.run(true)", lambda: subprocess.run(["true"], check=True)),
        ("run_process, unsandboxed", through("off", False)),
        ("run_process, sandboxed, no network", through("auto", False)),
        ("run_process, sandboxed, network", through("auto", True)),
    ]
    load = os.getloadavg()[0]
    print(f"{starts} starts each; load average {load:.2f} on {os.cpu_count()} cores")
    floor = None
    for label, start_one in rows:
        start_one()  # warm: imports, the bubblewrap probe
        times = timed(starts, start_one)
        median = statistics.median(times)
        p90 = statistics.quantiles(times, n=10)[-1]
        floor = floor or median
        print(f"{label:40s} median {median:7.2f} ms  p90 {p90:7.2f} ms  x{median / floor:5.1f}")


if __name__ == "__main__":
    main()
