"""Which Chromium the browser tests drive (tests/find_chromium.py): the machine's own,
found by name on PATH, or one line saying what to install — never a traceback."""

import os
import subprocess
import sys

from tests.conftest import ROOT


def _find(tmp_path, path_dirs, **env):
    empty_cache = tmp_path / "no-playwright-browsers"
    empty_cache.mkdir(exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "tests.find_chromium", "--no-install"],
        cwd=ROOT,
        env={
            **{k: v for k, v in os.environ.items() if k != "LOOP_CHROMIUM"},
            "PATH": os.pathsep.join(str(d) for d in path_dirs),
            "PLAYWRIGHT_BROWSERS_PATH": str(empty_cache),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
    )


def _fake(directory, name):
    directory.mkdir(exist_ok=True)
    browser = directory / name
    browser.write_text("#!/bin/sh\nexit 0\n")
    browser.chmod(0o755)
    return browser


def test_a_chrome_on_path_is_found_by_any_of_its_usual_names(tmp_path):
    for name in ("chromium", "chromium-browser", "google-chrome"):
        bin_dir = tmp_path / name
        browser = _fake(bin_dir, name)
        found = _find(tmp_path, [bin_dir])
        assert found.returncode == 0, found.stderr
        assert found.stdout.strip() == f"browser tests: {browser}"


def test_chromium_is_preferred_and_loop_chromium_names_another(tmp_path):
    bin_dir = tmp_path / "bin"
    chromium = _fake(bin_dir, "chromium")
    _fake(bin_dir, "google-chrome")
    assert _find(tmp_path, [bin_dir]).stdout.strip() == f"browser tests: {chromium}"
    mine = _fake(tmp_path / "mine", "my-chrome")
    named = _find(tmp_path, [bin_dir], LOOP_CHROMIUM=str(mine))
    assert named.stdout.strip() == f"browser tests: {mine}"
    wrong = _find(tmp_path, [bin_dir], LOOP_CHROMIUM=str(tmp_path / "nothing-here"))
    assert wrong.returncode == 1
    assert wrong.stderr.strip().splitlines() == [
        f"LOOP_CHROMIUM={tmp_path / 'nothing-here'} is not an executable file."
    ]


def test_no_browser_anywhere_says_what_to_install_in_one_line(tmp_path):
    found = _find(tmp_path, [tmp_path / "empty"])
    assert found.returncode == 1
    lines = found.stderr.strip().splitlines()
    assert len(lines) == 1, found.stderr
    assert "Traceback" not in found.stderr
    assert "apt-get install chromium" in lines[0]
    assert "playwright install chromium" in lines[0]
