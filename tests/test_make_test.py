"""`make test` picks its pytest-xdist processes from what it runs: four for the suite (or a
folder of it), one process per named file up to four, and none for a single file, where
starting workers (each with its database, queue and Celery worker) costs more than it
saves. TEST_WORKERS, when given, wins (docs/performance.md, "pytest-xdist")."""

import os
import re
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def workers(*args: str) -> int:
    """The -n `make test` would pass to pytest (0: none), read from `make -n`."""
    env = {k: v for k, v in os.environ.items() if k not in ("TEST_WORKERS", "PYTEST_ARGS")}
    target = "test-fast" if "fast" in args else "test"
    shown = subprocess.run(
        ["make", "-n", "--no-print-directory", target, *(a for a in args if a != "fast")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    [line] = [line for line in shown.splitlines() if "/bin/pytest" in line]
    found = re.search(r"/bin/pytest -n (\d+)", line)
    return int(found[1]) if found else 0


ONE = "tests/engine/test_durations.py"
OTHER = "tests/engine/test_dag.py"


@pytest.mark.parametrize(
    "args, expected",
    [
        ((), 4),
        (("fast",), 4),
        ((f"PYTEST_ARGS={ONE}",), 0),
        ((f"PYTEST_ARGS={ONE}::test_one -x -q",), 0),
        ((f"PYTEST_ARGS={ONE} {OTHER}",), 2),
        ((f"PYTEST_ARGS={ONE} tests/kernel",), 4),
        (("PYTEST_ARGS=tests/kernel -x",), 4),
        (("PYTEST_ARGS=-m 'not browser'",), 4),
        ((f"PYTEST_ARGS={ONE}", "TEST_WORKERS=3"), 3),
        (("TEST_WORKERS=0",), 0),
    ],
)
def test_make_test_starts_as_many_workers_as_what_it_runs_needs(args, expected):
    assert workers(*args) == expected
