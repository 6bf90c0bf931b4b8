"""api_key_env and inline base_url allow-lists: refused at validation (with the line), in
the admin form, and again at run time."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import pytest
from django.urls import reverse

from recipes.loader import load_recipe
from runs.models import ProviderConfig
from runs.providers.base import ProviderError
from runs.providers.http import api_key
from runs.providers.registry import resolve


def inline(key: str = "OPENAI_API_KEY", url: str = "https://api.openai.com/v1") -> str:
    return textwrap.dedent(f"""\
        name: p
        provider: agent
        providers:
          agent:
            kind: openai
            base_url: {url}
            api_key_env: {key}
        nodes:
          - id: work
            prompt: hi
        """)


def only_error(source: str):
    result = load_recipe(source)
    assert not result.ok
    (problem,) = result.errors
    return problem


def test_allowed_key_and_host_validate():
    assert load_recipe(inline()).ok
    assert load_recipe(inline("ANTHROPIC_API_KEY", "http://127.0.0.1:9999/v1")).ok


@pytest.mark.parametrize("name", ["DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "SECRET_KEY"])
def test_console_secrets_are_refused_with_the_line(name, settings):
    settings.LOOP_PROVIDER_ENV = [name]  # even when an administrator lists it
    problem = only_error(inline(name))
    assert problem.line == 7 and problem.path == "providers.agent.api_key_env"
    assert "console's own secrets" in problem.message


def test_unlisted_key_names_are_refused_until_the_setting_adds_them(settings):
    problem = only_error(inline("HOME_TOKEN"))
    assert problem.line == 7 and "not an allowed API key variable" in problem.message
    assert "LOOP_PROVIDER_ENV" in problem.message
    settings.LOOP_PROVIDER_ENV = ["HOME_TOKEN"]
    assert load_recipe(inline("HOME_TOKEN")).ok


@pytest.mark.parametrize(
    "url", ["http://10.0.0.5:8080/v1", "http://169.254.169.254/latest", "http://db.internal/v1"]
)
def test_inline_base_url_on_other_hosts_is_refused_with_the_line(url):
    problem = only_error(inline(url=url))
    assert problem.line == 6 and problem.path == "providers.agent.base_url"
    assert "not an allowed provider host" in problem.message


def test_provider_hosts_setting_replaces_the_list(settings):
    settings.LOOP_PROVIDER_HOSTS = ["llm.example.org"]
    assert load_recipe(inline(url="https://llm.example.org/v1")).ok
    assert not load_recipe(inline(url="https://api.openai.com/v1")).ok


def test_run_time_refuses_secret_key_names(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/x")
    with pytest.raises(ProviderError, match="api_key_env refused") as caught:
        api_key("agent", "DATABASE_URL", required=True)
    assert "pw@db" not in str(caught.value)
    monkeypatch.setenv("HOME_TOKEN", "sk-home")
    with pytest.raises(ProviderError, match="not an allowed API key variable"):
        api_key("agent", "HOME_TOKEN", required=True)


@pytest.mark.django_db
def test_run_time_refuses_inline_hosts_off_the_list():
    declared = SimpleNamespace(
        kind="openai",
        base_url="http://10.1.2.3/v1",
        model="m",
        api_key_env="OPENAI_API_KEY",
        command=None,
        options={},
    )
    spec = SimpleNamespace(provider="agent", providers={"agent": declared})
    with pytest.raises(ProviderError, match="base_url refused: host '10.1.2.3'"):
        resolve(None, spec)


@pytest.mark.django_db
def test_admin_form_refuses_key_names_off_the_list(client, admin_user):
    client.force_login(admin_user)
    form = {
        "name": "local",
        "kind": "openai",
        "base_url": "http://10.0.0.9:11434/v1",
        "model": "llama3",
        "options": "{}",
        "enabled": "on",
    }
    url = reverse("admin:runs_providerconfig_add")
    for name, says in [
        ("DATABASE_URL", b"console&#x27;s own secrets"),
        ("HOME_TOKEN", b"not an allowed API key variable"),
    ]:
        page = client.post(url, {**form, "api_key_env": name})
        assert page.status_code == 200 and says in page.content, name
        assert not ProviderConfig.objects.filter(name="local").exists()
    added = client.post(url, {**form, "api_key_env": "OPENAI_API_KEY"})
    assert added.status_code == 302
    assert ProviderConfig.objects.get(name="local").api_key_env == "OPENAI_API_KEY"


def test_by_default_inline_providers_may_use_only_the_public_api_hosts():
    """Internal addresses (127.0.0.1, localhost, a private network) are refused unless an
    administrator lists them; the test suite adds 127.0.0.1 and localhost for its fake API servers."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "LOOP_PROVIDER_HOSTS"}
    shown = subprocess.run(
        [
            sys.executable,
            "-c",
            "import django; django.setup(); from django.conf import settings;"
            " print(','.join(settings.LOOP_PROVIDER_HOSTS))",
        ],
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    assert shown == "api.openai.com,api.anthropic.com"
