"""Which provider a name resolves to, the admin configuration, and clear setup errors."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.urls import reverse

from loops.workflow.format import ProviderSpec
from runs.models import ProviderConfig
from runs.providers import registry
from runs.providers.anthropic import AnthropicProvider
from runs.providers.base import AgentRequest, ProviderError
from runs.providers.claude import ClaudeProvider
from runs.providers.codex import CodexProvider
from runs.providers.command import CommandProvider
from runs.providers.demo import DemoProvider
from runs.providers.gemini import GeminiProvider
from runs.providers.openai import OpenAIProvider
from runs.providers.opencode import OpenCodeProvider

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_worktree_wrapper(monkeypatch):
    monkeypatch.delenv("LOOP_GIT_WORKTREES", raising=False)


def spec(provider=None, **providers):
    declared = {name: ProviderSpec.model_validate(value) for name, value in providers.items()}
    return SimpleNamespace(provider=provider, providers=declared)


@pytest.mark.parametrize(
    "kind, cls",
    [
        ("claude", ClaudeProvider),
        ("codex", CodexProvider),
        ("opencode", OpenCodeProvider),
        ("gemini", GeminiProvider),
        ("openai", OpenAIProvider),
        ("anthropic", AnthropicProvider),
        ("command", CommandProvider),
        ("demo", DemoProvider),
    ],
)
def test_inline_providers_of_every_kind(kind, cls):
    declared = {
        "kind": kind,
        "command": "echo hi",
        "base_url": "http://localhost:9/v1",
        "model": "m",
    }
    provider = registry.resolve("mine", spec(mine=declared), None)
    assert isinstance(provider, cls) and provider.name == "mine"


def test_inline_extras_become_options():
    provider = registry.resolve(
        "api",
        spec(
            api={
                "kind": "openai",
                "base_url": "http://localhost:9/v1",
                "structured_output": "best_effort",
                "price_in": 2,
            }
        ),
        None,
    )
    assert provider.structured_output == "best_effort" and provider.options["price_in"] == 2


def test_recipe_map_wins_over_the_admin_and_the_admin_over_builtins():
    ProviderConfig.objects.create(name="claude", kind="command", command="echo admin")
    assert isinstance(registry.resolve("claude", spec(), None), CommandProvider)
    inline = spec(claude={"kind": "claude", "command": "/bin/true"})
    assert isinstance(registry.resolve("claude", inline, None), ClaudeProvider)


def test_the_recipe_level_provider_is_the_fallback_name():
    ProviderConfig.objects.create(
        name="local", kind="openai", base_url="http://localhost:9/v1", model="llama"
    )
    provider = registry.resolve(None, spec(provider="local"), None)
    assert isinstance(provider, OpenAIProvider) and provider.model == "llama"


def test_the_default_provider_config_then_the_setting(settings):
    settings.LOOP_DEFAULT_PROVIDER = "demo"
    assert isinstance(registry.resolve(None, spec(), None), DemoProvider)
    ProviderConfig.objects.create(name="house", kind="command", command="cat", is_default=True)
    provider = registry.resolve(None, spec(), None)
    assert isinstance(provider, CommandProvider) and provider.name == "house"


def test_only_one_default():
    first = ProviderConfig.objects.create(name="a", kind="demo", is_default=True)
    ProviderConfig.objects.create(name="b", kind="demo", is_default=True)
    first.refresh_from_db()
    assert not first.is_default
    assert list(ProviderConfig.objects.filter(is_default=True).values_list("name", flat=True)) == [
        "b"
    ]


def test_disabled_and_unknown_names_say_what_to_do():
    ProviderConfig.objects.create(name="off", kind="demo", enabled=False)
    with pytest.raises(ProviderError, match="disabled"):
        registry.resolve("off", spec(), None)
    with pytest.raises(ProviderError, match="not configured.*providers:"):
        registry.resolve("nope", spec(), None)
    with pytest.raises(ProviderError, match="unknown kind 'gpt'"):
        registry.resolve("x", spec(x={"kind": "gpt"}), None)


def test_builtin_cli_names_need_their_binary(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    provider = registry.resolve("codex", spec(), None)
    with pytest.raises(ProviderError, match="`codex` was not found") as caught:
        provider.run(AgentRequest(prompt="hi", workdir=str(tmp_path)), lambda chunk: None)
    assert caught.value.permanent


def test_http_providers_need_a_model_and_their_key(monkeypatch, tmp_path):
    request = AgentRequest(prompt="hi", workdir=str(tmp_path))
    no_model = OpenAIProvider("o", {"base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(ProviderError, match="no model"):
        no_model.run(request, lambda chunk: None)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    anthropic = AnthropicProvider("a", {"model": "claude-x"})
    with pytest.raises(ProviderError, match="ANTHROPIC_API_KEY .*not set"):
        anthropic.run(request, lambda chunk: None)


def test_admin_lists_and_adds_providers_without_secrets(client, admin_user):
    ProviderConfig.objects.create(
        name="openai",
        kind="openai",
        base_url="https://api.openai.com/v1",
        api_key_env="OPENAI_API_KEY",
    )
    client.force_login(admin_user)
    page = client.get(reverse("admin:runs_providerconfig_changelist"))
    assert page.status_code == 200 and b"OPENAI_API_KEY" in page.content
    added = client.post(
        reverse("admin:runs_providerconfig_add"),
        {
            "name": "local",
            "kind": "openai",
            "base_url": "http://localhost:11434/v1",
            "model": "llama3",
            "api_key_env": "sk-123 secret",
            "options": "{}",
            "enabled": "on",
        },
    )
    assert added.status_code == 200 and b"NAME of an environment variable" in added.content
    assert not ProviderConfig.objects.filter(name="local").exists()
