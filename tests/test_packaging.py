"""The project installs as a package (not editable) and runs from another folder.

The checkout is copied (so the build leaves nothing in it), installed with pip into a
folder of its own, and run by the venv's interpreter with only that folder added to the
path: the dependencies come from the venv, the console's own code only from the install.
The editable install's finder is taken off the import machinery, and the run fails when
any module was imported from the checkout. SQLite and a temporary LOOP_DATA_DIR: no
server needed, nothing fetched (no build isolation, no dependencies installed)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.packaging

CHECKOUT = Path(__file__).resolve().parent.parent
LEFT_OUT = (".git", ".venv", ".loop-data", ".loop-test-data", "build", "dist", "tests", "bench")

# Runs `python -m console ...` with the checkout kept off the import path.
BOOTSTRAP = """
import os, runpy, sys
checkout = os.environ.pop("CHECKOUT_UNDER_TEST")
venv = os.path.realpath(sys.prefix)  # the venv may live in the checkout
def under(path, folder):
    return path == folder or path.startswith(folder + os.sep)
def inside(path):
    path = os.path.realpath(path or "")
    return under(path, checkout) and not under(path, venv)
sys.path[:] = [p for p in sys.path if not inside(p or os.getcwd())]
sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in getattr(f, "__module__", "")]
sys.path_hooks[:] = [h for h in sys.path_hooks if "__editable__" not in getattr(h, "__module__", "")]
sys.path_importer_cache.clear()
try:
    runpy.run_module("console", run_name="__main__", alter_sys=True)
finally:
    leaked = sorted(n for n, m in list(sys.modules.items()) if inside(getattr(m, "__file__", None)))
    if leaked:
        print("imported from the checkout:", *leaked, file=sys.stderr)
        sys.stderr.flush()
        os._exit(3)
"""


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("packaging")
    source = root / "source"
    shutil.copytree(
        CHECKOUT,
        source,
        ignore=shutil.ignore_patterns(*LEFT_OUT, "__pycache__", "*.egg-info", "node_modules"),
    )
    target = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        check=True,
        cwd=root,
    )
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (root / "bootstrap.py").write_text(BOOTSTRAP)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "LOOP_"))}
    env.pop("PYTHONPATH", None)
    env.update(
        PYTHONPATH=str(target),
        CHECKOUT_UNDER_TEST=str(CHECKOUT),
        DATABASE_URL=f"sqlite:///{root / 'console.sqlite3'}",
        LOOP_DATA_DIR=str(root / "data"),
        LOOP_RECIPE_DIRS="",
        LOOP_REPOSITORIES="",
    )

    def console(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(root / "bootstrap.py"), *args],
            cwd=elsewhere,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done.stdout

    console.target = target
    return console


def test_check_and_migrate_run_from_the_installed_copy(installed):
    assert (installed.target / "bin" / "loop-console").is_file()  # the installed command
    installed("check")
    installed("migrate", "--noinput")
    assert "[X]" in installed("showmigrations", "notifications", "loops")


def test_every_app_and_its_files_come_from_the_installed_copy(installed):
    probe = (
        "import json;"
        "from django.apps import apps;"
        "from django.template.loader import get_template;"
        "from django.contrib.staticfiles import finders;"
        "print(json.dumps({"
        "'apps': [a.path for a in apps.get_app_configs() if a.name.split('.')[0] != 'django'],"
        "'templates': [get_template(n).origin.name for n in"
        " ('base.html', 'admin/base_site.html', 'runs/detail.html', 'loops/detail.html',"
        " 'planeai/review.html')],"
        "'static': [finders.find(n) for n in ('css/console.css', 'favicon.svg')]}))"
    )
    found = json.loads(installed("shell", "-c", probe).splitlines()[-1])
    target = str(installed.target)
    ours = [path for path in found["apps"] if "site-packages" not in path]
    assert ours and all(path.startswith(target) for path in ours), found["apps"]
    for path in found["templates"] + found["static"]:
        assert path and path.startswith(target), found


def test_the_login_page_comes_from_the_installed_copy(installed):
    """The project's templates/ and static/ sit at the top of the checkout; the wheel
    carries them (pyproject.toml's force-include) and the page renders from there."""
    installed("migrate", "--noinput")
    probe = (
        "from django.test import Client;"
        "page = Client().get('/accounts/login/', HTTP_HOST='localhost');"
        "print(page.status_code, 'name=\"password\"' in page.content.decode())"
    )
    assert installed("shell", "-c", probe).splitlines()[-1] == "200 True"


def test_recipe_sync_finds_the_bundled_recipes(installed):
    installed("migrate", "--noinput")
    installed("recipe", "sync")
    listed = installed("recipe", "ls", "--json")
    for name in ("counter-loop", "no-mistakes", "writer-reviewer"):
        assert name in listed
    assert "scored-writer-reviewer" in listed  # a Python recipe
