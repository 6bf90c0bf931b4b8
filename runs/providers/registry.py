"""Resolve a recipe's `provider:` name to a Provider instance.

Where a name is looked up, in order:
1. the recipe's own `providers:` map (inline declarations of any kind; secrets only by
   environment-variable name, `api_key_env`);
2. the providers configured in the admin (ProviderConfig rows, enabled ones);
3. the builtin names: `demo`, and `claude` / `codex` / `opencode` / `gemini` (their
   binaries on PATH).
When neither the node nor the recipe names a provider, the default ProviderConfig is used,
else settings.LOOP_DEFAULT_PROVIDER, else the default assistant of the repository the
recipe came from (its `.archon/config.yaml`); with none, the step fails saying so.
"""

from __future__ import annotations

from django.conf import settings

from . import limits
from .base import Provider, ProviderError
from .command import CommandProvider
from .demo import DemoProvider
from .policy import host_problem

BUILTIN = {"demo", "claude", "codex", "opencode", "gemini"}
KINDS = ("command", "claude", "codex", "opencode", "gemini", "openai", "anthropic", "demo")


def build(name: str, kind: str, config: dict) -> Provider:
    """The provider `kind` of `config`, carrying its limits and the account they count
    against (runs/providers/limits.py)."""
    provider = _of_kind(name, kind, config)
    provider.limits = limits.Limits.of(config)
    if provider.limits:
        provider.limit_account = limits.account(name, kind, config, _key_value(config))
    return provider


def _key_value(config: dict) -> str:
    """The API key's value, to tell accounts apart (hashed, never kept); "" when unread."""
    from console.secrets import secret

    env_name = config.get("api_key_env")
    try:
        return secret(env_name) if env_name else ""
    except Exception:  # noqa: BLE001 - the call itself reports a key it cannot read
        return ""


def _of_kind(name: str, kind: str, config: dict) -> Provider:
    if kind == "demo":
        return DemoProvider(
            name,
            delay=config.get("delay", settings.LOOP_DEMO_DELAY),
            complete_after=config.get("complete_after"),
            tool_calls=config.get("tool_calls"),
            iterations=config.get("iterations") or 2,
        )
    if kind == "command":
        return CommandProvider(name, config.get("command") or "")
    if kind == "claude":
        from .claude import ClaudeProvider

        return ClaudeProvider(name, config)
    if kind == "codex":
        from .codex import CodexProvider

        return CodexProvider(name, config)
    if kind == "opencode":
        from .opencode import OpenCodeProvider

        return OpenCodeProvider(name, config)
    if kind == "gemini":
        from .gemini import GeminiProvider

        return GeminiProvider(name, config)
    if kind == "openai":
        from .openai import OpenAIProvider

        return OpenAIProvider(name, config)
    if kind == "anthropic":
        from .anthropic import AnthropicProvider

        return AnthropicProvider(name, config)
    raise ProviderError(
        f"provider '{name}': unknown kind '{kind}' (known kinds: {', '.join(KINDS)})"
    )


def _inline_config(declared) -> dict:
    return {
        **(declared.options or {}),
        "command": declared.command,
        "base_url": declared.base_url,
        "model": declared.model,
        "api_key_env": declared.api_key_env,
    }


def resolve(name: str | None, spec, run) -> Provider:
    """`spec` is the recipe's WorkflowSpec (its `providers:` map declares inline agents);
    `run` the run calling (None: a process with no run), whose project decides which of
    the admin's accounts it may use (`ProviderConfig.objects.usable_in`)."""
    provider = _resolve(name, spec, run.project_id if run is not None else None)
    from runs import worktree

    return worktree.RecordingDiffs(provider) if worktree.enabled() else provider


def _resolve(name: str | None, spec, project_id: int | None) -> Provider:
    name = name or getattr(spec, "provider", None)
    if name:
        return _named(name, spec, project_id)
    from runs.models import ProviderConfig

    default = ProviderConfig.objects.default_in(project_id)
    if default is not None:
        return build(default.name, default.kind, default.as_config())
    if not settings.LOOP_DEFAULT_PROVIDER and getattr(spec, "default_provider", None):
        return _named(spec.default_provider, spec, project_id)  # the repository's assistant
    if not settings.LOOP_DEFAULT_PROVIDER:
        raise ProviderError(
            "no provider is named for this step and no default provider is set: add "
            "`provider: NAME` to the recipe (`provider: demo` is the built-in demo agent) "
            "or mark a provider as the default in the admin (Provider configs)"
        )
    return _named(settings.LOOP_DEFAULT_PROVIDER, spec, project_id)


def default_configured(project_id: int | None) -> bool:
    """A provider answers for the nodes of project `project_id`'s recipes that name none:
    the admin's default there (or shared), or the setting."""
    from runs.models import ProviderConfig

    if settings.LOOP_DEFAULT_PROVIDER:
        return True
    return ProviderConfig.objects.default_in(project_id) is not None


def unresolvable(name: str | None, project_id: int | None) -> str | None:
    """Why `name` (None: the default provider) cannot answer for a step of project
    `project_id`'s recipe, looked up where a recipe without inline providers looks (the
    admin's accounts that project may use, the builtin names); None when it can.
    Validation asks here, so a recipe that cannot run says so before it is started."""
    from runs.models import ProviderConfig

    if not name:
        if ProviderConfig.objects.default_in(project_id) is not None:
            return None
        if not settings.LOOP_DEFAULT_PROVIDER:
            return "no default provider is set"
        name = settings.LOOP_DEFAULT_PROVIDER
    row = ProviderConfig.objects.usable_in(project_id).filter(name=name).first()
    if row is not None:
        return (
            None
            if row.enabled
            else f"provider '{name}' is disabled in the admin (Provider configs)"
        )
    return None if name in BUILTIN else f"provider '{name}' is not configured"


def _named(name: str, spec, project_id: int | None) -> Provider:
    from runs.models import ProviderConfig

    declared = (getattr(spec, "providers", None) or {}).get(name)
    if declared is not None:
        # Inline providers come from recipe authors: their hosts are re-checked at run time
        # (admin rows are configured by administrators and may point anywhere).
        if problem := host_problem(declared.base_url):
            raise ProviderError(f"provider '{name}': base_url refused: {problem}")
        return build(name, declared.kind, _inline_config(declared))
    # Another project's account is, to this run, one that is not configured.
    row = ProviderConfig.objects.usable_in(project_id).filter(name=name).first()
    if row is not None and row.enabled:
        return build(row.name, row.kind, row.as_config())
    if name in BUILTIN:
        return build(name, name, {})
    if row is not None:
        raise ProviderError(f"provider '{name}' is disabled in the admin (Provider configs)")
    if not getattr(spec, "INLINE_PROVIDERS", True):
        # A step-machine recipe has no `providers:` map: do not send its author to one.
        raise ProviderError(
            f"provider '{name}' is not configured: add it in the admin (Provider configs) or use "
            "`provider: demo`"
        )
    raise ProviderError(
        f"provider '{name}' is not configured: add it in the admin (Provider configs), declare it in "
        f'the recipe\'s `providers:` map (for example `{name}: {{kind: command, command: "..."}}`)'
        " or use `provider: demo`"
    )
