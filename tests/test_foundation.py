"""The foundation: settings read strictly, health, login everywhere, roles, a real worker."""

import subprocess
import sys

import pytest
from django.urls import reverse

from runs.actor import ENGINE
from tests.conftest import ROOT, wait_run


def settings_error(**env):
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='console.settings'; django.setup()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )
    return result.returncode, result.stderr


@pytest.mark.parametrize(
    "name, value",
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "mysql://x/y"),
        ("REDIS_URL", "http://x"),
        ("ALLOWED_HOSTS", "a,,b"),
        ("LOOP_LEASE_SECONDS", "soon"),
    ],
)
def test_malformed_setting_names_the_variable(tmp_path, name, value):
    code, stderr = settings_error(LOOP_DATA_DIR=str(tmp_path), **{name: value})
    assert code != 0
    assert "ImproperlyConfigured" in stderr and name in stderr


def test_embedded_default_uses_sqlite_and_a_local_broker(tmp_path):
    code = (
        "import django, os; os.environ['DJANGO_SETTINGS_MODULE']='console.settings'; django.setup();"
        "from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'], s.CELERY_BROKER_URL)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LOOP_DATA_DIR": str(tmp_path)},
        check=True,
    ).stdout
    assert "sqlite3" in out and f"redis+socket://{tmp_path}/redis.sock" in out


@pytest.mark.django_db
def test_healthz_reports_database_and_broker(client, embedded_broker):
    from runs import sandbox

    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ok",
        "database": "ok",
        "broker": "ok",
        "sandbox": "on" if sandbox.status().active else "off",
    }


@pytest.mark.django_db
def test_pages_require_login(client):
    response = client.get(reverse("inbox"))
    assert response.status_code == 302 and response.url.startswith("/accounts/login/")
    assert client.get("/accounts/login/").status_code == 200


@pytest.mark.django_db
def test_roles_exist_with_their_permissions(viewer, operator, editor):
    assert not viewer.has_perm("runs.operate_run") and viewer.has_perm("runs.view_run")
    assert operator.has_perm("runs.operate_run") and not operator.has_perm("recipes.change_recipe")
    assert editor.has_perm("recipes.change_recipe") and editor.has_perm("runs.operate_run")


def test_bundled_recipes_complete_through_a_real_worker(live_worker, bundled):
    from runs import services

    for slug in ("counter-loop", "fix-until-green", "writer-reviewer"):
        run = services.start_run(bundled[slug], actor=ENGINE, message="hello")
        wait_run(run, "completed", "failed")
        assert run.status == "completed", (slug, run.error)


def test_event_sequence_is_gapless_per_run(live_worker, bundled):
    from runs import services

    run = services.start_run(bundled["counter-loop"], actor=ENGINE, message="x")
    wait_run(run, "completed", "failed")
    seqs = list(run.events.values_list("seq", flat=True))
    assert seqs == list(range(1, len(seqs) + 1))
    assert seqs and run.last_seq == seqs[-1]


def test_the_embedded_default_migrates_from_scratch(tmp_path):
    """`make run` migrates a fresh SQLite database: every migration must work there too
    (CI's suite runs on PostgreSQL)."""
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "LOOP_DATA_DIR": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "console.sqlite3").exists()
