"""Security headers on every response, and a clean `check --deploy` in production settings."""

import secrets
import subprocess
import sys

import pytest

from tests.conftest import ROOT


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/accounts/login/", "/", "/runs/", "/recipes/"])
def test_security_headers(client, operator, path):
    client.force_login(operator)
    response = client.get(path, follow=False)
    csp = response.headers["Content-Security-Policy"]
    assert (
        "script-src 'self'" in csp
        and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    )
    assert "frame-ancestors 'none'" in csp
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"


def test_check_deploy_is_clean_under_production_settings(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "LOOP_DATA_DIR": str(tmp_path),
        "SECRET_KEY": secrets.token_urlsafe(60),
        "DATABASE_URL": "postgres://loop@db.invalid:5432/loop",
        "REDIS_URL": "redis://redis.invalid:6379/0",
        "ALLOWED_HOSTS": "loop.example.com",
        "SECURE_COOKIES": "true",
        "SECURE_SSL_REDIRECT": "true",
        "SECURE_HSTS_SECONDS": "31536000",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def settings_in_a_fresh_process(tmp_path, **env) -> dict:
    """The security settings a process started with only ``env`` ends up with."""
    code = (
        "import json; from django.conf import settings; import django; django.setup();"
        "print(json.dumps({name: getattr(settings, name) for name in"
        " ('SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_SSL_REDIRECT')}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "LOOP_DATA_DIR": str(tmp_path),
            "DJANGO_SETTINGS_MODULE": "console.settings",
            **env,
        },
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    import json

    return json.loads(result.stdout.strip().splitlines()[-1])


def test_secure_cookies_are_off_on_plain_postgresql_as_the_readme_says(tmp_path):
    """A plain-HTTP trial on PostgreSQL must be able to log in: a database URL alone does
    not switch cookies to HTTPS-only (the login itself over uvicorn is in
    test_connection_bounds)."""
    on_postgres = settings_in_a_fresh_process(
        tmp_path, DATABASE_URL="postgres://loop@db.invalid:5432/loop"
    )
    assert on_postgres["SESSION_COOKIE_SECURE"] is False
    assert on_postgres["CSRF_COOKIE_SECURE"] is False
    readme = (ROOT / "README.md").read_text()
    row = next(line for line in readme.splitlines() if line.startswith("| `SECURE_COOKIES`"))
    assert "| off" in row


@pytest.mark.parametrize(
    "switch", [{"SECURE_COOKIES": "true"}, {"SECURE_SSL_REDIRECT": "true"}], ids=str
)
def test_https_deployments_get_secure_cookies(tmp_path, switch):
    values = settings_in_a_fresh_process(
        tmp_path, DATABASE_URL="postgres://loop@db.invalid:5432/loop", **switch
    )
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
