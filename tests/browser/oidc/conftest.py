"""A real OpenID provider (the certified `oidc-provider` package from npm, run by
tests/browser/oidc/provider.mjs) on 127.0.0.1, and the console served by uvicorn with sign-in
through it: one console beside passwords, one with LOOP_PASSWORD_LOGIN=0.

The package is installed once, with the machine's npm and registry, from the pinned
package.json and package-lock.json here into a folder of the virtualenv (`npm ci`), as
`make dev` installs the other npm packages the suite uses; it is installed again only when
the lock file changes."""

from __future__ import annotations

import fcntl
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.conf import settings

from tests.conftest import ROOT, _free_port, stop_group, wait_until_serving

HERE = Path(__file__).resolve().parent
INSTALLED = Path(sys.prefix) / "oidc-provider"
CLIENT_ID = "loop-console"
CLIENT_SECRET = "test-client-secret-of-the-console-0123456789"
PROVIDER_NAME = "Test provider"
SCOPES = "openid email profile groups"


def install_provider() -> Path:
    """The provider's node_modules, installed by `npm ci` unless the same lock file was."""
    INSTALLED.mkdir(exist_ok=True)
    lock = (HERE / "package-lock.json").read_text()
    with open(INSTALLED / ".lock", "w") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)  # xdist's processes install it once
        stamp = INSTALLED / "installed-lock.json"
        if stamp.is_file() and stamp.read_text() == lock:
            return INSTALLED / "node_modules"
        npm = shutil.which("npm")
        if npm is None:
            pytest.fail("npm not found: the OpenID provider (oidc-provider) cannot be installed")
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(HERE / name, INSTALLED / name)
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=INSTALLED,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            pytest.fail(f"npm ci of oidc-provider failed:\n{done.stderr[-3000:]}")
        stamp.write_text(lock)
    return INSTALLED / "node_modules"


@dataclass
class Provider:
    issuer: str
    users_file: Path

    def set_people(self, people: dict) -> None:
        """Who may sign in, with their groups: read again by the provider at each sign-in."""
        temporary = self.users_file.with_suffix(".tmp")
        temporary.write_text(json.dumps(people))
        temporary.replace(self.users_file)


@pytest.fixture(scope="session")
def console_ports():
    """The two consoles' ports, chosen before the provider starts: it knows their redirect
    URIs."""
    return {"with_passwords": _free_port(), "without_passwords": _free_port()}


@pytest.fixture(scope="session")
def oidc_provider(console_ports, tmp_path_factory):
    modules = install_provider()
    folder = tmp_path_factory.mktemp("oidc-provider")
    (folder / "node_modules").symlink_to(modules)  # the script imports oidc-provider
    shutil.copyfile(HERE / "provider.mjs", folder / "provider.mjs")
    consoles = [f"http://127.0.0.1:{port}" for port in console_ports.values()]
    client = {
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [f"{url}/oidc/callback/" for url in consoles],
        "post_logout_redirect_uris": [f"{url}/accounts/login/" for url in consoles],
    }
    (folder / "client.json").write_text(json.dumps(client))
    provider = Provider(f"http://127.0.0.1:{_free_port()}", folder / "users.json")
    provider.set_people({})
    port = provider.issuer.rsplit(":", 1)[1]
    log_path = Path(settings.LOOP_DATA_DIR) / "oidc-provider.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ["node", "provider.mjs", port, "users.json", "client.json"],
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    wait_until_serving(
        provider.issuer + "/.well-known/openid-configuration", proc, log_path, "node"
    )
    yield provider
    stop_group(proc)


def _serve_console(worker_env: dict, port: int, name: str, **extra: str):
    """`uvicorn console.asgi:application` on `port`, on the test database, with `extra`."""
    log_path = Path(settings.LOOP_DATA_DIR) / f"uvicorn-{name}.log"
    env = {**worker_env, "PGAPPNAME": "loop-console-test-web", **extra}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "console.asgi:application"]
            + ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    wait_until_serving(url + "/healthz", proc, log_path, "uvicorn")
    return url, proc


def _oidc_env(provider: Provider, tmp_path_factory) -> dict:
    secret_file = tmp_path_factory.mktemp("oidc-secret") / "client-secret"
    secret_file.write_text(CLIENT_SECRET + "\n")  # read through LOOP_OIDC_CLIENT_SECRET_FILE
    return {
        "LOOP_OIDC_ISSUER": provider.issuer,
        "LOOP_OIDC_CLIENT_ID": CLIENT_ID,
        "LOOP_OIDC_CLIENT_SECRET_FILE": str(secret_file),
        "LOOP_OIDC_NAME": PROVIDER_NAME,
        "LOOP_OIDC_SCOPES": SCOPES,
    }


@pytest.fixture(scope="session")
def oidc_console(worker_env, oidc_provider, console_ports, tmp_path_factory):
    """The console offering "Sign in with Test provider" beside its password form."""
    env = _oidc_env(oidc_provider, tmp_path_factory)
    url, proc = _serve_console(worker_env, console_ports["with_passwords"], "oidc", **env)
    yield url
    stop_group(proc)


@pytest.fixture(scope="session")
def oidc_only_console(worker_env, oidc_provider, console_ports, tmp_path_factory):
    """The console with LOOP_PASSWORD_LOGIN=0: the identity provider only."""
    env = {**_oidc_env(oidc_provider, tmp_path_factory), "LOOP_PASSWORD_LOGIN": "0"}
    port = console_ports["without_passwords"]
    url, proc = _serve_console(worker_env, port, "oidc-only", **env)
    yield url
    stop_group(proc)
