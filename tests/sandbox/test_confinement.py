"""What the sandbox enforces besides hiding things (test_escape.py): the network switch,
resource limits, git metadata an agent cannot plant code in, the modes and how each
surface says the sandbox is off, secrets from files, the non-dumpable worker."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from recipes.loader import load_recipe
from runs import services
from runs.actor import ENGINE
from runs.sandbox import (
    Confinement,
    Limits,
    SandboxUnavailable,
    cgroups,
    for_run,
    report,
    run_process,
)
from runs.sandbox import mode as sandbox_mode
from runs.sandbox.repository import record_worktree
from tests.conftest import ROOT, make_user, wait_run
from tests.sandbox.conftest import requires_sandbox, sending_to, start_private_worker


def run(argv: list[str], confinement: Confinement, **kwargs):
    return run_process(argv, sandbox=confinement, on_chunk=lambda text: None, **kwargs)


def bash(script: str, confinement: Confinement):
    return run(["bash", "-c", script], confinement)


# --- the network ---------------------------------------------------------------------------


@pytest.fixture
def listener():
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def accept():
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1]
    stop.set()
    server.close()


CONNECT = "python3 -c 'import socket, sys; socket.create_connection((\"127.0.0.1\", {port}), 5)'"


@requires_sandbox
def test_without_the_network_a_step_reaches_nothing_on_the_host(listener, tmp_path):
    closed = bash(CONNECT.format(port=listener), for_run(None, tmp_path, network=False))
    opened = bash(CONNECT.format(port=listener), for_run(None, tmp_path, network=True))
    assert closed.exit_code != 0 and "Connection refused" in closed.output
    assert opened.exit_code == 0, opened.output


def test_steps_default_to_the_administrators_network_and_agents_have_it(settings):
    from runs.sandbox import agent_network, step_network

    settings.LOOP_SANDBOX_NETWORK = "none"
    assert step_network(None, None) is False
    assert step_network(None, True) is True and step_network(False, True) is False
    settings.LOOP_SANDBOX_NETWORK = "on"
    assert step_network(None, None) is True
    assert agent_network(None) is True and agent_network(False) is False


def test_network_and_limits_are_checked_with_their_lines(settings):
    settings.LOOP_SANDBOX_MEMORY_MB = 1024
    result = load_recipe(
        "name: n\nnetwork: sometimes\nlimits: {memory_mb: 4096, cores: 2}\n"
        "nodes:\n  - id: a\n    bash: echo\n    network: on\n    limits: {cpu_seconds: 0}\n"
    )
    problems = {(p.line, p.message) for p in result.errors}
    assert (2, "network must be 'none' or 'on', not 'sometimes'") in problems
    assert any(
        line == 3 and "memory_mb: 4096 is more than the administrator" in message
        for line, message in problems
    ), problems
    assert any(
        line == 8 and "cpu_seconds must be a whole number above 0" in message
        for line, message in problems
    ), problems
    ok = load_recipe("name: n\nnetwork: on\nnodes:\n  - id: a\n    bash: echo\n    network: none\n")
    assert ok.ok, ok.errors
    assert ok.spec.network is True and ok.spec.nodes[0].network is False


# --- resources -----------------------------------------------------------------------------


@requires_sandbox
def test_limits_bound_the_process_and_what_it_starts(tmp_path):
    limits = Limits(cpu_seconds=7, memory_mb=128, processes=50, file_mb=5)
    shown = bash(
        "ulimit -t; ulimit -d; ulimit -f; ulimit -u", for_run(None, tmp_path, limits=limits)
    )
    assert shown.output.split()[:3] == ["7", str(128 * 1024), str(5 * 1024)]
    # Processes: the sandbox's own cgroup where one can be made (test_limits.py), else the
    # per-user rlimit.
    if "pids" not in cgroups._parents():
        assert shown.output.split()[3] == "50"
    hungry = run(
        ["python3", "-c", "bytearray(512 * 1024 * 1024)"],
        for_run(None, tmp_path, limits=Limits(memory_mb=128)),
    )
    assert hungry.exit_code != 0 and "MemoryError" in hungry.output
    spinning = bash("while :; do :; done", for_run(None, tmp_path, limits=Limits(cpu_seconds=1)))
    assert spinning.exit_code not in (0, None)


def test_a_recipe_asks_for_less_never_more(settings):
    settings.LOOP_SANDBOX_CPU_SECONDS = 600
    assert Limits(cpu_seconds=60).effective()["cpu_seconds"] == 60
    assert Limits().effective()["cpu_seconds"] == 600
    assert Limits(cpu_seconds=6000).effective()["cpu_seconds"] == 600


# --- git metadata --------------------------------------------------------------------------


def git(*args, cwd):
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )


@requires_sandbox
@pytest.mark.parametrize("layout", ["project", "worktree"])
def test_an_agent_commits_but_cannot_plant_hooks_or_configuration(tmp_path, layout):
    repo = tmp_path / "repo"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    (repo / "a.txt").write_text("a\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "first", cwd=repo)
    workdir = repo
    if layout == "worktree":
        workdir = tmp_path / "wt"
        git("worktree", "add", "-q", "-b", "side", str(workdir), cwd=repo)
        record_worktree(workdir, repo)  # as the console does for the worktrees it makes
    gitdir = repo / ".git"
    done = bash(
        f"""
        echo b > b.txt && git add b.txt && git -c user.name=a -c user.email=a@a commit -qm agent \
          && echo COMMITTED
        echo '#!/bin/sh' > {gitdir}/hooks/post-checkout 2>/dev/null && echo HOOK-WRITTEN
        echo '[core] fsmonitor = touch /tmp/x' >> {gitdir}/config 2>/dev/null && echo CONFIG-WRITTEN
        git config core.fsmonitor 'touch /tmp/x' 2>/dev/null && echo CONFIG-SET
        echo '* filter=x' > {gitdir}/info/attributes 2>/dev/null && echo ATTRIBUTES-WRITTEN
        mkdir -p {gitdir}/modules/evil/hooks 2>/dev/null && echo MODULE-MADE
        """,
        for_run(None, workdir),
    )
    assert "COMMITTED" in done.output, done.output
    for planted in (
        "HOOK-WRITTEN",
        "CONFIG-WRITTEN",
        "CONFIG-SET",
        "ATTRIBUTES-WRITTEN",
        "MODULE-MADE",
    ):
        assert planted not in done.output
    assert "fsmonitor" not in (gitdir / "config").read_text()
    assert not (gitdir / "hooks" / "post-checkout").exists()
    assert "agent" in git("log", "--format=%s", "-1", cwd=workdir).stdout


@requires_sandbox
def test_a_read_only_role_writes_nothing(tmp_path):
    (tmp_path / "a.txt").write_text("a")
    done = bash("echo b > a.txt || echo REFUSED", for_run(None, tmp_path, writable=False))
    assert "REFUSED" in done.output and (tmp_path / "a.txt").read_text() == "a"


# --- modes ---------------------------------------------------------------------------------


@pytest.fixture
def no_bubblewrap(settings):
    settings.LOOP_SANDBOX_BWRAP = "/nonexistent/bwrap"
    report._cache = None
    yield
    report._cache = None


def test_required_refuses_to_start_a_process_without_the_sandbox(no_bubblewrap, settings, tmp_path):
    settings.LOOP_SANDBOX = "required"
    with pytest.raises(SandboxUnavailable, match="LOOP_SANDBOX=required, and bubblewrap is not"):
        bash("touch ran", for_run(None, tmp_path))
    assert not (tmp_path / "ran").exists()


def test_auto_without_bubblewrap_runs_and_says_why(no_bubblewrap, settings, tmp_path):
    settings.LOOP_SANDBOX = "auto"
    state = sandbox_mode.status()
    assert not state.active and "bubblewrap is not installed" in state.detail
    assert "apt-get install bubblewrap" in state.detail
    assert bash("echo ran", for_run(None, tmp_path)).output == "ran\n"
    settings.LOOP_SANDBOX = "off"
    assert sandbox_mode.status().detail == "LOOP_SANDBOX=off"


@pytest.fixture
def unsandboxed_worker(worker_env, tmp_path_factory):
    worker = start_private_worker(
        worker_env, tmp_path_factory.mktemp("plain"), "plain", LOOP_SANDBOX_BWRAP="/nonexistent"
    )
    yield worker
    worker.stop()


def test_without_bubblewrap_every_surface_says_so(
    unsandboxed_worker, transactional_db, monkeypatch, make_recipe, client, django_user_model
):
    report._cache = None
    staff = make_user(django_user_model, "stan", is_staff=True, is_superuser=True)
    with sending_to(unsandboxed_worker, monkeypatch):
        run = services.start_run(
            make_recipe("name: t\nnodes:\n  - id: a\n    bash: echo hi\n", slug="plain"),
            actor=ENGINE,
        )
        wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    (event,) = run.events.filter(kind="sandbox_off")
    assert "bubblewrap is not installed" in event.data["reason"]
    log = unsandboxed_worker.log_path.read_text()
    assert "WARNING" in log and "steps and agents run WITHOUT a sandbox" in log
    # The worker says so beside its heartbeat (under its own queue's prefix: read that
    # one); every surface reads it from there.
    from runs.executor import heartbeat

    prefix = f"loopconsole:{unsandboxed_worker.queue}"
    monkeypatch.setattr(heartbeat, "KEY", f"{prefix}:workers")
    monkeypatch.setattr(heartbeat, "SANDBOX_KEY", f"{prefix}:worker-sandbox")
    report._cache = None
    assert report.unsandboxed()
    assert client.get("/healthz").json()["sandbox"] == "off"
    client.force_login(staff)
    page = client.get("/").content.decode()
    assert (
        "Steps and agents run without a sandbox" in page and "bubblewrap is not installed" in page
    )
    assert "Steps and agents run without a sandbox" in client.get("/admin/").content.decode()
    metrics = client.get("/metrics").content.decode()
    assert f'loop_worker_sandboxed{{worker="{_worker_name(unsandboxed_worker)}"}} 0.0' in metrics


def _worker_name(worker) -> str:
    from runs.executor import heartbeat

    states = heartbeat.sandbox_states()
    return next(name for name, state in states.items() if not state["active"])


@pytest.fixture
def required_worker(worker_env, tmp_path_factory):
    worker = start_private_worker(
        worker_env,
        tmp_path_factory.mktemp("required"),
        "required",
        LOOP_SANDBOX="required",
        LOOP_SANDBOX_BWRAP="/nonexistent",
    )
    yield worker
    worker.stop()


def test_a_required_sandbox_fails_the_step_with_the_reason(
    required_worker, transactional_db, monkeypatch, make_recipe
):
    with sending_to(required_worker, monkeypatch):
        run = services.start_run(
            make_recipe("name: t\nnodes:\n  - id: a\n    bash: touch ran\n", slug="required"),
            actor=ENGINE,
        )
        wait_run(run, "completed", "failed")
    assert run.status == "failed"
    assert "LOOP_SANDBOX=required, and bubblewrap is not installed" in run.error


# --- secrets -------------------------------------------------------------------------------


def test_secrets_may_be_files(tmp_path):
    (tmp_path / "key").write_text("key-from-a-file\n")
    (tmp_path / "db").write_text(f"sqlite:///{tmp_path}/from-file.sqlite3\n")
    (tmp_path / "anthropic").write_text("sk-ant-from-a-file\n")
    env = {k: v for k, v in os.environ.items() if k not in ("SECRET_KEY", "DATABASE_URL")} | {
        "SECRET_KEY_FILE": str(tmp_path / "key"),
        "DATABASE_URL_FILE": str(tmp_path / "db"),
        "ANTHROPIC_API_KEY_FILE": str(tmp_path / "anthropic"),
        "DJANGO_SETTINGS_MODULE": "console.settings",
    }
    env.pop("ANTHROPIC_API_KEY", None)
    shown = subprocess.run(
        [sys.executable, "-c", SHOW_SECRETS], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [
        "key-from-a-file",
        str(tmp_path / "from-file.sqlite3"),
        "sk-ant-from-a-file",
    ]


SHOW_SECRETS = """
import django
django.setup()
from django.conf import settings
from runs.sandbox import inherited
print(settings.SECRET_KEY)
print(settings.DATABASES["default"]["NAME"])
print(inherited("ANTHROPIC_API_KEY")["ANTHROPIC_API_KEY"])
"""


def test_an_unreadable_secret_file_stops_start_up_naming_it(tmp_path):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "console.settings"}
    env.pop("SECRET_KEY", None)
    env["SECRET_KEY_FILE"] = str(tmp_path / "missing")
    shown = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert shown.returncode != 0
    assert "SECRET_KEY_FILE names" in shown.stderr and "cannot be read" in shown.stderr


@pytest.mark.parametrize(
    "start", ["from console.celery import keep_secrets; keep_secrets()", "import console.asgi"]
)
def test_the_worker_and_the_web_server_are_not_dumpable(start):
    """Processes of the same user cannot read a non-dumpable process's environment or memory
    (PR_GET_DUMPABLE says 0 once the worker or the web server has started)."""
    code = (
        "import ctypes, os\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'console.settings')\n"
        "import django; django.setup()\n"
        f"{start}\n"
        "print(ctypes.CDLL('libc.so.6').prctl(3, 0, 0, 0, 0))\n"
    )
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split()[-1] == "0"


def _process_memory(pid: int) -> bytes:
    """What a same-user process (ptrace rules permitting) can read of `pid`'s writable
    memory, where its copy of its environment lives."""
    chunks = []
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as memory:
        for line in maps:
            span, perms = line.split()[:2]
            if not perms.startswith("rw"):
                continue
            start, end = (int(part, 16) for part in span.split("-"))
            try:
                memory.seek(start)
                chunks.append(memory.read(end - start))
            except OSError:
                continue
    return b"".join(chunks)


def test_the_embedded_broker_is_given_no_secret(settings, tmp_path, monkeypatch):
    """The bundled Redis runs as the console's user and is not hardened: it is given nothing
    of the console's environment but PATH, so its memory holds no secret to read."""
    from console import embedded

    monkeypatch.setenv("SECRET_KEY", "canary-secret-key-for-the-broker")
    settings.EMBEDDED_REDIS_SOCKET = tmp_path / "redis.sock"
    proc = embedded.start(tmp_path)
    try:
        memory = _process_memory(proc.pid)
        assert b"PATH=" in memory  # the probe reads the environment's copy
        assert b"canary-secret-key-for-the-broker" not in memory
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_data_folder_is_hidden_even_under_a_shown_folder(settings, tmp_path):
    """A data folder inside a folder the sandbox shows (LOOP_SANDBOX_READ) is covered."""
    from runs.sandbox.bwrap import command

    settings.LOOP_SANDBOX_READ = [str(Path(settings.LOOP_DATA_DIR).parent)]
    words = command(["true"], for_run(None, tmp_path), call_folder=None, relay=None)
    data = str(Path(settings.LOOP_DATA_DIR).resolve())
    assert words[words.index(data) - 1] == "--tmpfs"
