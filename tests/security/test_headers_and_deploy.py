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
