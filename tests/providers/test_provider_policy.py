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


def inline(
    key: str = "OPENAI_API_KEY", url: str = "https://api.openai.com/v1", kind: str = "openai"
) -> str:
    return textwrap.dedent(f"""\
        name: p
        provider: agent
        providers:
          agent:
            kind: {kind}
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
    assert load_recipe(inline("ANTHROPIC_API_KEY", "https://api.anthropic.com", "anthropic")).ok
    # A host on LOOP_PROVIDER_HTTP_HOSTS (make test lists 127.0.0.1): plain http, any port.
    assert load_recipe(inline("ANTHROPIC_API_KEY", "http://127.0.0.1:9999/v1", "anthropic")).ok


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


@pytest.mark.parametrize(
    ("url", "fixed"),
    [
        ("http://api.openai.com/v1", "https://api.openai.com/v1"),
        ("HTTP://API.OPENAI.COM/v1?x=1", "https://api.openai.com/v1?x=1"),
        ("http://api.openai.com:443/v1", "https://api.openai.com/v1"),
    ],
)
def test_plain_http_is_refused_saying_what_to_write(url, fixed, settings):
    settings.LOOP_PROVIDER_HTTP_HOSTS = ["127.0.0.1"]
    problem = only_error(inline(url=url))
    assert problem.line == 6 and problem.path == "providers.agent.base_url"
    assert "uses plain http, which would send the API key unencrypted" in problem.message
    assert f"write {fixed!r}" in problem.message
    assert "LOOP_PROVIDER_HTTP_HOSTS" in problem.message


@pytest.mark.parametrize("url", ["https://api.openai.com:9/v1", "https://api.openai.com:443/v1"])
def test_an_explicit_port_is_refused_off_the_local_list(url):
    problem = only_error(inline(url=url))
    assert problem.path == "providers.agent.base_url"
    assert "names a port: write 'https://api.openai.com/v1'" in problem.message


def test_the_local_list_allows_http_and_ports_and_is_an_allowed_host(settings):
    settings.LOOP_PROVIDER_HOSTS = ["api.openai.com"]
    settings.LOOP_PROVIDER_HTTP_HOSTS = ["models.lan"]
    assert load_recipe(inline(url="http://models.lan:11434/v1")).ok
    assert load_recipe(inline(url="https://models.lan:8443/v1")).ok
    settings.LOOP_PROVIDER_HTTP_HOSTS = []
    problem = only_error(inline(url="http://models.lan:11434/v1"))
    assert "not an allowed provider host" in problem.message


@pytest.mark.parametrize(
    ("kind", "key", "instead"),
    [
        ("openai", "ANTHROPIC_API_KEY", "write api_key_env: OPENAI_API_KEY"),
        ("anthropic", "OPENAI_API_KEY", "write api_key_env: ANTHROPIC_API_KEY"),
        ("command", "OPENAI_API_KEY", "remove api_key_env"),
    ],
)
def test_a_vendor_key_goes_only_to_its_own_kind(kind, key, instead):
    url = "https://api.anthropic.com" if kind == "anthropic" else "https://api.openai.com/v1"
    problem = only_error(inline(key, url, kind))
    assert problem.line == 7 and problem.path == "providers.agent.api_key_env"
    assert f"{key} is the key of" in problem.message and instead in problem.message
    assert f"LOOP_PROVIDER_ENV={kind}:{key}" in problem.message


def test_the_administrator_may_allow_a_key_for_one_kind_or_for_every_kind(settings):
    settings.LOOP_PROVIDER_ENV = ["openai:ANTHROPIC_API_KEY", "anthropic:ROUTER_KEY"]
    assert load_recipe(inline("ANTHROPIC_API_KEY")).ok
    url = "https://api.anthropic.com"
    assert load_recipe(inline("ROUTER_KEY", url, "anthropic")).ok
    problem = only_error(inline("ROUTER_KEY"))  # an openai provider: not for it
    assert problem.message.startswith(
        "ROUTER_KEY is not an allowed API key variable (allowed for an openai provider: "
        "OPENAI_API_KEY, ANTHROPIC_API_KEY)"
    )
    settings.LOOP_PROVIDER_ENV = ["OPENAI_API_KEY"]  # a plain name: any kind
    assert load_recipe(inline("OPENAI_API_KEY", url, "anthropic")).ok


def test_run_time_refuses_a_key_of_another_kind(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-canary")
    with pytest.raises(ProviderError, match="api_key_env refused: ANTHROPIC_API_KEY is the key"):
        api_key("agent", "ANTHROPIC_API_KEY", required=True, kind="openai")
    assert api_key("agent", "ANTHROPIC_API_KEY", required=True, kind="anthropic") == (
        "sk-ant-canary"
    )


def test_an_http_provider_reads_its_key_from_a_file_as_the_docs_say(monkeypatch, tmp_path):
    key_file = tmp_path / "anthropic-key"
    key_file.write_text("sk-ant-from-a-file\n")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(key_file))
    assert api_key("agent", "ANTHROPIC_API_KEY", required=True, kind="anthropic") == (
        "sk-ant-from-a-file"
    )
    monkeypatch.setenv("ANTHROPIC_API_KEY_FILE", str(tmp_path / "missing"))
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY_FILE names .* cannot be read"):
        api_key("agent", "ANTHROPIC_API_KEY", required=True, kind="anthropic")
    monkeypatch.delenv("ANTHROPIC_API_KEY_FILE")
    with pytest.raises(ProviderError, match="nor ANTHROPIC_API_KEY_FILE"):
        api_key("agent", "ANTHROPIC_API_KEY", required=True, kind="anthropic")


@pytest.mark.django_db
def test_run_time_refuses_plain_http_to_a_public_host():
    declared = SimpleNamespace(
        kind="openai",
        base_url="http://api.openai.com/v1",
        model="m",
        api_key_env="OPENAI_API_KEY",
        command=None,
        options={},
    )
    spec = SimpleNamespace(provider="agent", providers={"agent": declared})
    with pytest.raises(ProviderError, match="base_url refused: .* uses plain http"):
        resolve(None, spec, None)


def test_provider_hosts_setting_replaces_the_list(settings):
    settings.LOOP_PROVIDER_HOSTS = ["llm.example.org"]
    assert load_recipe(inline(url="https://llm.example.org/v1")).ok
    assert not load_recipe(inline(url="https://api.openai.com/v1")).ok


def test_run_time_refuses_secret_key_names(monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgres://user:pw@db/x")
    with pytest.raises(ProviderError, match="api_key_env refused") as caught:
        api_key("agent", "DATABASE_URL", required=True, kind="openai")
    assert "pw@db" not in str(caught.value)
    monkeypatch.setenv("HOME_TOKEN", "sk-home")
    with pytest.raises(ProviderError, match="not an allowed API key variable"):
        api_key("agent", "HOME_TOKEN", required=True, kind="openai")


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
        resolve(None, spec, None)


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
        ("ANTHROPIC_API_KEY", b"ANTHROPIC_API_KEY is the key of anthropic providers"),
    ]:
        page = client.post(url, {**form, "api_key_env": name})
        assert page.status_code == 200 and says in page.content, name
        assert not ProviderConfig.objects.filter(name="local").exists()
    added = client.post(url, {**form, "api_key_env": "OPENAI_API_KEY"})
    assert added.status_code == 302
    assert ProviderConfig.objects.get(name="local").api_key_env == "OPENAI_API_KEY"


def fresh_settings(expression: str, **changed: str | None):
    """`expression` of django.conf.settings in a new process whose environment has `changed`
    (None removes a variable): what the console starts with. (exit status, output)"""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in changed}
    env.update({k: v for k, v in changed.items() if v is not None})
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import django; django.setup(); from django.conf import settings; print({expression})",
        ],
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def test_by_default_inline_providers_may_use_only_the_public_api_hosts_over_https():
    """Internal addresses (127.0.0.1, localhost, a private network) are refused unless an
    administrator lists them, and no host may be reached over plain http; the test suite
    adds 127.0.0.1 and localhost to both lists for its fake API servers."""
    status, shown = fresh_settings(
        "','.join(settings.LOOP_PROVIDER_HOSTS), settings.LOOP_PROVIDER_HTTP_HOSTS",
        LOOP_PROVIDER_HOSTS=None,
        LOOP_PROVIDER_HTTP_HOSTS=None,
    )
    assert (status, shown) == (0, "api.openai.com,api.anthropic.com []")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("openai:SECRET_KEY", "LOOP_PROVIDER_ENV may not name SECRET_KEY"),
        ("command:ROUTER_KEY", "'command:ROUTER_KEY' is neither NAME nor KIND:NAME"),
        ("openai:", "'openai:' is neither NAME nor KIND:NAME"),
    ],
)
def test_the_console_refuses_to_start_with_a_malformed_provider_env(value, says):
    status, shown = fresh_settings("1", LOOP_PROVIDER_ENV=value)
    assert status != 0 and "ImproperlyConfigured" in shown and says in shown
