"""Upgrading from the last release keeps every run readable, on PostgreSQL and on SQLite.

The last release's tree comes out of git (`git archive`, nothing in the working tree is
touched). Its own code migrates an empty database and writes the rows a console of that
release holds (tests/upgrade/old_rows.py): a recipe of each kind, runs in the statuses a
step machine set, a driven run's pipeline steps, a Python run's agents, an iteration and a
gate. Then this tree's code migrates the same database and reads it the way a person and a
script do (tests/upgrade/new_checks.py): each run's page and API answer, the admin's run
list, the rows the migrations rewrote (a prompt step's usage, now its call's iteration),
the fork form of a driven run's pipeline step.

Both halves run as `manage.py` processes on the venv's interpreter, each in its own tree,
with an environment of their own: none of the suite's DJANGO_* / LOOP_* settings, its
database or its Redis reach them.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest

pytestmark = pytest.mark.upgrade

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
# The release before the kinds moved (issue 35); bump when a release lands.
LAST_RELEASE = "76fcbc7"
# The marks before the JSON line each script prints (old_rows.py, new_checks.py).
IDS_MARK = "UPGRADE-IDS "
CHECKS_MARK = "UPGRADE-CHECKS "
# A step machine's statuses in the release -> (the kernel's status, the phase) after it.
STEP_MACHINE_WORDS = {
    "observing": ("running", "observing"),
    "verifying": ("running", "verifying"),
    "blocked": ("paused", "blocked"),
    "needs_human": ("paused", "needs_human"),
    "completed_unreviewed": ("completed", "completed_unreviewed"),
    "approved": ("completed", "approved"),
    "merged": ("completed", "merged"),
}
# Not handed to the two halves: the suite's own database, broker and settings. Without a
# broker named, what they send is not delivered (nothing listens on the embedded broker's
# socket in their data folder), as the release's rows need no worker.
NOT_INHERITED = {"DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "PYTHONPATH"}
NOT_INHERITED_PREFIXES = ("DJANGO_", "LOOP_", "PYTEST_XDIST_")


# --- the last release's tree ---------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory) -> Path:
    """The last release's files, from `git archive` of ROOT's repository."""
    try:
        found = git("cat-file", "-e", f"{LAST_RELEASE}^{{commit}}")
    except FileNotFoundError:
        pytest.skip("git is not installed: the last release's tree cannot be read")
    if found.returncode != 0:
        pytest.skip(
            f"{ROOT} is not a git checkout holding commit {LAST_RELEASE} (the last release), "
            "so there is nothing to upgrade from: run from a clone with that history"
        )
    archive = git("archive", "--format=tar", LAST_RELEASE)
    assert archive.returncode == 0, archive.stderr.decode()
    tree = tmp_path_factory.mktemp("last-release")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(tree, filter="data")
        else:  # Python before 3.11.4: git's own archive of a known commit
            tar.extractall(tree)
    return tree


# --- the databases -------------------------------------------------------------------------


def postgres_server() -> str:
    """`postgres://user[:password]@host:port` of the server: DATABASE_URL's when it names
    PostgreSQL, else the local one."""
    url = os.environ.get("DATABASE_URL", "")
    if url.startswith(("postgres://", "postgresql://")):
        parts = urlsplit(url)
        return f"postgres://{parts.netloc}"
    return "postgres://postgres@127.0.0.1:5432"


@pytest.fixture(scope="module")
def postgres_url():
    """A PostgreSQL database of this test's own, dropped afterwards."""
    import psycopg

    server, name = postgres_server(), f"upgrade_{os.getpid()}"
    try:
        admin = psycopg.connect(f"{server}/postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL answers at {urlsplit(server).hostname}: {exc}")
    with admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"{server}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def database_url(request, tmp_path_factory) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('sqlite') / 'upgrade.sqlite3'}"
    return request.getfixturevalue("postgres_url")


# --- the two halves ------------------------------------------------------------------------


def manage(tree: Path, database_url: str, data_dir: Path, *args: str) -> str:
    """`manage.py ARGS` with `tree`'s code on `database_url`; its standard output."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in NOT_INHERITED and not key.startswith(NOT_INHERITED_PREFIXES)
    }
    data_dir.mkdir(exist_ok=True)
    env |= {
        "PYTHONPATH": str(tree),
        "DATABASE_URL": database_url,
        "LOOP_DATA_DIR": str(data_dir),
        "LOOP_TESTING": "1",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, (
        f"manage.py {args[0]} in {tree} failed ({done.returncode}):\n"
        f"{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    )
    return done.stdout


def printed(stdout: str, mark: str) -> dict:
    """The JSON a script printed after `mark`."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(mark):
            return json.loads(line.removeprefix(mark))
    raise AssertionError(f"the script printed no {mark.strip()} line:\n{stdout[-3000:]}")


@pytest.fixture(scope="module")
def upgraded(old_tree, database_url, tmp_path_factory) -> tuple[dict, dict]:
    """What the release made (old_rows.py: MADE) and what this tree saw of it once it had
    migrated the database (new_checks.py), for every test of one database."""
    old_data, data = tmp_path_factory.mktemp("old-data"), tmp_path_factory.mktemp("data")
    manage(old_tree, database_url, old_data, "migrate", "--no-input", "-v", "0")
    script = (HERE / "old_rows.py").read_text()
    made = printed(manage(old_tree, database_url, old_data, "shell", "-c", script), IDS_MARK)
    manage(ROOT, database_url, data, "migrate", "--no-input", "-v", "0")
    checks = f"MADE = {made!r}\n" + (HERE / "new_checks.py").read_text()
    seen = printed(manage(ROOT, database_url, data, "shell", "-c", checks), CHECKS_MARK)
    return made, seen


# --- the tests -----------------------------------------------------------------------------


def test_every_run_keeps_the_word_it_had(upgraded):
    """A step machine's status becomes its phase beside the kernel's status; every page
    and the API still show the word the run had, and the API tells the phase too."""
    made, seen = upgraded
    assert set(made["step_machine"]) == set(STEP_MACHINE_WORDS)
    assert set(seen["runs"]) == set(made["statuses"])
    for pk, old in made["statuses"].items():
        run = seen["runs"][pk]
        status, phase = STEP_MACHINE_WORDS.get(old, (old, ""))
        assert run["row"] == [status, phase], f"run {pk}, {old} before"
        assert run["page"] == 200, f"run {pk}'s page ({old} before)"
        assert run["page_shows_old_word"], f"run {pk}'s page does not show {old!r}"
        api = (run["api"], run["api_status"], run["api_phase"])
        assert api == (200, old, phase), f"run {pk} in the API, {old} before"
    assert (seen["admin_runs"], seen["admin_run"]) == (200, 200)


def test_a_step_machine_event_tells_the_kernel_status(upgraded):
    """The `run_<word>` events the release logged learn the status their run now has."""
    made, seen = upgraded
    for word, pk in made["step_machine"].items():
        events = seen["runs"][str(pk)]["events"]
        assert events, f"the {word} run has no run_ event"
        for kind, status in events:
            assert status == STEP_MACHINE_WORDS[kind.removeprefix("run_")][0], (word, events)


def test_the_kinds_rows_are_theirs_after_the_upgrade(upgraded):
    """A driven run's pipeline steps become `pipeline_step` rows, a Python run's agents
    stay `agent` (in a loop or not); recipes keep their kinds; the gate still waits, on
    its run's page; a pipeline step's iteration can still be forked."""
    made, seen = upgraded
    driven, python = made["driven"]["rows"], made["python"]["rows"]
    assert {seen["row_kinds"][str(pk)] for pk in driven.values()} == {"pipeline_step"}
    assert {seen["row_kinds"][str(pk)] for pk in python.values()} == {"agent"}
    assert seen["recipe_kinds"] == {str(pk): kind for pk, kind in made["recipes"].values()}
    assert seen["gate"] == ["pending", True]
    assert seen["fork_form"] == {"status": 200, "form": True, "refused": False}


def test_a_prompt_step_s_usage_becomes_its_call_s_iteration(upgraded):
    """Every agent call is an iteration: a body step's usage moves from its state into an
    iteration of its row; the group's iteration stops carrying the sum, so the run's total
    is unchanged and counted once; the API's steps read it from there."""
    usage = upgraded[1]["usage"]
    tokens_in, tokens_out, cost = usage["totals"]
    assert (tokens_in, tokens_out, Decimal(cost)) == (30, 12, Decimal("0.03"))
    assert usage["calls"] == {
        "write": [[1, "completed", "Ask write.", 10, 4]],
        "review": [[1, "completed", "Ask review.", 20, 8]],
    }
    assert all("tokens_in" not in keys and "prompt" in keys for keys in usage["states"])
    assert usage["group_iteration"] == [[None, None]]
    assert usage["api_steps"]["draft-loop.write"] == [10, 4]
    assert usage["api_steps"]["draft-loop.review"] == [20, 8]


def test_a_python_run_of_the_release_still_loads(upgraded):
    """Its source imports `recipes.python`, the package's name before the kinds moved
    (loops/python/apps.py keeps it as another name of the same module)."""
    assert upgraded[1]["pinned_versions_load"]["python"] == ""


def test_a_driven_recipe_with_the_release_example_hook_still_loads(upgraded):
    """It names `loops.example_hooks:…`, the hooks' module before the kinds moved."""
    assert upgraded[1]["pinned_versions_load"]["driven_hooked"] == ""


def test_everything_is_in_the_default_project_and_nobody_loses_access(upgraded):
    _made, seen = upgraded
    assert seen["old_operator"] == {
        "projects": ["default"],
        "recipe_projects": ["default"],
        "run_projects": ["default"],
        "runs_page": 200,
        "run_page": 200,
        "may_operate": True,
    }
