"""The Chromium the browser tests drive: the one a machine already has, else one installed
the way the ecosystem installs it, else one line saying what to install.

Found in this order: `LOOP_CHROMIUM` (a path, when you want a particular one), then
`chromium`, `chromium-browser`, `google-chrome`, `google-chrome-stable` and `chrome` on
PATH, then the browser Playwright installed for itself. `make test` runs
`python -m tests.find_chromium` first, which installs one when none is found: Playwright's own
(`playwright install chromium`, where its download can be reached), else Debian's
`chromium` package with apt-get when the user is root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
HOW_TO_INSTALL = (
    "The browser tests need Chromium or Chrome and found none: install Debian's with "
    "`apt-get install chromium` (as root) or Playwright's with `.venv/bin/playwright install "
    "chromium`, or name one with LOOP_CHROMIUM=/path/to/chrome "
    "(without them: make test PYTEST_ARGS='-m \"not browser\"')."
)
INSTALL_TIMEOUT = 900


class NoChromium(RuntimeError):
    pass


def _runnable(path: str | None) -> bool:
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


def playwright_browser() -> str | None:
    """The Chromium `playwright install chromium` put in its cache, if it did."""
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            path = playwright.chromium.executable_path
    except Exception:  # noqa: BLE001 - no driver, no browser: not found either way
        return None
    return path if _runnable(path) else None


def find() -> str | None:
    """The path of a Chromium to drive, or None. `LOOP_CHROMIUM` wins when it is set."""
    named = os.environ.get("LOOP_CHROMIUM", "").strip()
    if named:
        if not _runnable(named):
            raise NoChromium(f"LOOP_CHROMIUM={named} is not an executable file.")
        return named
    for name in NAMES:
        path = shutil.which(name)
        if path:
            return path
    return playwright_browser()


def executable() -> str:
    """For the test fixtures: the browser's path, or NoChromium with one line to say."""
    path = find()
    if path is None:
        raise NoChromium(HOW_TO_INSTALL)
    return path


def _try(command: list[str], doing: str) -> bool:
    print(f"{doing}: {' '.join(command)}", file=sys.stderr)
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"  could not: {exc}", file=sys.stderr)
        return False
    if done.returncode != 0:
        said = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        print(f"  could not: {said[0].strip() if said else done.returncode}", file=sys.stderr)
        return False
    return True


def ensure() -> str | None:
    """Find a Chromium, else install one (Playwright's, then Debian's when root)."""
    path = find()
    if path:
        return path
    print("no Chromium or Chrome found for the browser tests", file=sys.stderr)
    playwright = [sys.executable, "-m", "playwright", "install", "chromium"]
    if _try(playwright, "installing Playwright's Chromium") and (path := find()):
        return path
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        if (
            _try(["apt-get", "update", "-qq"], "updating apt's package lists")
            and _try(
                ["apt-get", "install", "-y", "-qq", "chromium"], "installing Debian's chromium"
            )
            and (path := find())
        ):
            return path
    return None


def main(argv: list[str]) -> int:
    try:
        path = find() if "--no-install" in argv else ensure()
    except NoChromium as exc:
        print(exc, file=sys.stderr)
        return 1
    if path is None:
        print(HOW_TO_INSTALL, file=sys.stderr)
        return 1
    print(f"browser tests: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
