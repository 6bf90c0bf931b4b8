"""What a sandboxed child may do to the host: nothing a capability would allow, whoever the
worker runs as (a user namespace of its own, no capabilities, no namespaces of its own);
and the sandbox decided once per worker, never silently dropped later."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from runs.sandbox import SandboxUnavailable, for_run, report, run_process
from runs.sandbox import mode as sandbox_mode
from runs.sandbox.bwrap import command
from tests.conftest import ROOT
from tests.sandbox.conftest import requires_sandbox

# Tries what root's capabilities allow: a handle of /usr's inode, then opening the host's
# file by that handle (CAP_DAC_READ_SEARCH), and making a user namespace of its own.
BOUNDARY = r"""
grep -E '^(CapEff|CapBnd|NoNewPrivs):' /proc/self/status
echo "uid: $(id -u)"
python3 - <<'PY'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
class Handle(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_uint), ("type", ctypes.c_int), ("data", ctypes.c_ubyte * 128)]
handle, mount = Handle(128), ctypes.c_int()
named = libc.name_to_handle_at(-100, b"/usr", ctypes.byref(handle), ctypes.byref(mount), 0)
print("NAMED:", named)
opened = libc.open_by_handle_at(os.open("/usr", os.O_RDONLY), ctypes.byref(handle), 0o200000)
print("OPENED:", opened, os.strerror(ctypes.get_errno()) if opened < 0 else "")
PY
unshare --user true 2>/dev/null && echo USERNS-MADE
echo BOUNDARY-PROBE-DONE
"""


def facts(output: str) -> dict[str, str]:
    """The probe's `NAME: value` lines."""
    pairs = (line.partition(":") for line in output.splitlines() if ":" in line)
    return {name.strip(): value.strip() for name, _, value in pairs}


def assert_no_power_over_the_host(output: str) -> None:
    assert "BOUNDARY-PROBE-DONE" in output, output
    shown = facts(output)
    assert shown["CapEff"] == "0000000000000000", output
    assert shown["CapBnd"] == "0000000000000000", output
    assert shown["NoNewPrivs"] == "1", output
    assert shown["NAMED"] == "0", output  # the probe ran: it got the handle
    assert shown["OPENED"].startswith("-1 Operation not permitted"), output
    assert "USERNS-MADE" not in output


@requires_sandbox
def test_a_child_has_no_capabilities_and_cannot_open_host_files_by_handle(tmp_path):
    done = run_process(
        ["bash", "-c", BOUNDARY], sandbox=for_run(None, tmp_path), on_chunk=lambda text: None
    )
    assert_no_power_over_the_host(done.output)
    # The worker's own uid (0 for a root worker), without any capability.
    assert facts(done.output)["uid"] == str(os.geteuid()), done.output


@requires_sandbox
def test_files_a_root_workers_child_writes_stay_the_workers(tmp_path):
    done = run_process(
        ["bash", "-c", "echo made > made.txt && ls -ln made.txt"],
        sandbox=for_run(None, tmp_path),
        on_chunk=lambda text: None,
    )
    assert done.exit_code == 0, done.output
    assert (tmp_path / "made.txt").stat().st_uid == os.geteuid()


# Run as an unprivileged user: the child process of a console whose worker is not root.
AS_USER = """
import os, sys
from runs.sandbox import for_run, run_process, status
assert status().active, status()
done = run_process(["bash", "-c", sys.argv[1]], sandbox=for_run(None, sys.argv[2]),
                   on_chunk=lambda text: None)
print(done.output)
"""


@requires_sandbox
def test_an_unprivileged_workers_child_has_the_same_boundary():
    folder = Path(tempfile.mkdtemp(prefix="loop-unprivileged-"))
    try:
        for name in ("work", "data"):
            (folder / name).mkdir()
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": str(folder),
            "LOOP_DATA_DIR": str(folder / "data"),
            "SECRET_KEY": "unprivileged-test",
            "DJANGO_SETTINGS_MODULE": "console.settings",
            "PYTHONPATH": str(ROOT),
        }
        argv = [sys.executable, "-c", AS_USER, BOUNDARY, str(folder / "work")]
        if os.geteuid() == 0:
            argv = _as_nobody(folder, argv)
        done = subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True)
        if done.returncode != 0 and "ModuleNotFoundError" in done.stderr:
            pytest.skip(
                f"the console's checkout or Python is not readable by nobody here: "
                f"{done.stderr.strip().splitlines()[-1]}"
            )
        assert done.returncode == 0, done.stderr
        assert_no_power_over_the_host(done.stdout)
        assert facts(done.stdout)["uid"] == ("65534" if os.geteuid() == 0 else str(os.geteuid()))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _as_nobody(folder: Path, argv: list[str]) -> list[str]:
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed: cannot become an unprivileged user")
    for path in (folder, *folder.iterdir()):
        os.chown(path, 65534, 65534)
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]


# --- one decision per worker ---------------------------------------------------------------


def test_every_child_starts_with_the_flags_the_probe_tried(tmp_path):
    flags = sandbox_mode.isolation()
    assert {"--unshare-user", "--cap-drop", "ALL", "--unshare-pid"} <= set(flags)
    words = command(["true"], for_run(None, tmp_path), call_folder=None, relay=None)
    assert words[1 : 1 + len(flags)] == flags


@pytest.fixture
def bubblewrap_copy(settings, tmp_path):
    """LOOP_SANDBOX_BWRAP: a copy of bubblewrap, which the test may remove."""
    found = shutil.which("bwrap")
    if found is None:
        pytest.skip(
            "bubblewrap is not installed (apt-get install bubblewrap): what happens when it goes away after the decision is not tested here"
        )
    copy = tmp_path / "bin" / "bwrap"
    copy.parent.mkdir()
    shutil.copy2(found, copy)
    settings.LOOP_SANDBOX = "auto"
    settings.LOOP_SANDBOX_BWRAP = str(copy)
    report._cache = None
    yield copy
    report._cache = None


@requires_sandbox
def test_bubblewrap_gone_after_the_decision_fails_the_step_never_unsandboxed(
    bubblewrap_copy, tmp_path
):
    workdir = tmp_path / "work"
    workdir.mkdir()
    assert sandbox_mode.status().active
    first = run_process(["echo", "ran"], sandbox=for_run(None, workdir), on_chunk=lambda t: None)
    assert first.output == "ran\n"
    bubblewrap_copy.unlink()
    with pytest.raises(SandboxUnavailable) as refused:
        run_process(["touch", "ran"], sandbox=for_run(None, workdir), on_chunk=lambda t: None)
    assert f"the sandbox's bubblewrap ({bubblewrap_copy}) cannot be started" in str(refused.value)
    assert "No such file or directory" in str(refused.value)
    assert not (workdir / "ran").exists()
    # What every surface shows is still the decision: the step failed rather than ran
    # where they say it would not.
    assert sandbox_mode.status().active and sandbox_mode.bwrap_path() == str(bubblewrap_copy)


def test_the_worker_decides_before_its_pool_forks():
    """The worker's main process decides at worker_init (before the prefork pool starts), so
    its pool processes inherit the decision its heartbeat reports."""
    code = (
        "import os; os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'console.settings')\n"
        "import django; django.setup()\n"
        "from console.celery import decide_sandbox\n"
        "from runs.sandbox.mode import _probed\n"
        "decide_sandbox(); print(_probed.cache_info().currsize)\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[-1] == "1"
