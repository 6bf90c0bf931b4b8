"""The sandbox's program for the suite (and the sqlite3 shell): bubblewrap if the machine
has it, else installed with apt-get where the user is root, else one line saying what the
suite cannot test.

`make test` runs `python -m tests.ensure_bubblewrap` first. Without bubblewrap the suite
still runs (steps run unsandboxed, as `make run` would there) and the tests of the
sandbox's boundary (tests/sandbox/) are skipped, saying why — except on CI (`CI=true`),
where they fail: a CI machine must not pass with the boundary untested.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

HOW_TO_INSTALL = (
    "bubblewrap is not installed: the sandbox's own tests will be skipped "
    "(install it with `apt-get install bubblewrap` as root, then run make test again)"
)


# Programs the suite runs, by the Debian package that brings each: the sandbox, and the
# sqlite3 shell whose dot-commands the shell checker's refusal table proves in real bash.
PACKAGES = {"bwrap": "bubblewrap", "sqlite3": "sqlite3"}


def main() -> int:
    missing = [package for program, package in PACKAGES.items() if not shutil.which(program)]
    if not missing:
        return 0
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for command in (
            ["apt-get", "update", "-qq"],
            ["apt-get", "install", "-y", "-qq", *missing],
        ):
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                break
        if shutil.which("bwrap"):
            print(f"installed {', '.join(missing)} (apt-get) for the suite")
            return 0
    print(HOW_TO_INSTALL, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
