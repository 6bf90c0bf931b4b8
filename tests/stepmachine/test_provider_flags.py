"""A read-only role starts its agent read-only where the CLI can; auto_approve lets a
writing role's agent act without asking."""

import sys
from pathlib import Path

from runs.providers.base import AgentRequest
from runs.providers.claude import ClaudeProvider
from runs.providers.codex import CodexProvider, provider_overrides
from runs.providers.gemini import GeminiProvider
from runs.providers.opencode import OpenCodeProvider

FAKES = Path(__file__).resolve().parents[1] / "providers" / "fakes"
FAKE_CLAUDE, FAKE_CODEX = FAKES / "fake_claude.py", FAKES / "fake_codex.py"


def request(**flags) -> AgentRequest:
    return AgentRequest(prompt="p", workdir="/", **flags)


def test_claude_starts_in_plan_mode_when_read_only_and_bypasses_prompts_when_auto():
    claude = ClaudeProvider("c", {"command": f"{sys.executable} {FAKE_CLAUDE}"})
    assert claude.argv(request(read_only=True, auto_approve=True))[-2:] == [
        "--permission-mode",
        "plan",
    ]
    assert claude.argv(request(auto_approve=True))[-2:] == [
        "--permission-mode",
        "bypassPermissions",
    ]
    assert "--permission-mode" not in claude.argv(request())
    configured = ClaudeProvider(
        "c", {"command": f"{sys.executable} {FAKE_CLAUDE}", "permission_mode": "default"}
    )
    assert configured.argv(request(read_only=True))[-1] == "default"  # the admin's choice wins


def test_codex_uses_a_read_only_sandbox_when_read_only():
    codex = CodexProvider("x", {"command": f"{sys.executable} {FAKE_CODEX}"})
    argv = codex.argv(request(read_only=True, auto_approve=True), None)
    assert argv[argv.index("--sandbox") + 1] == "read-only"
    assert "--dangerously-bypass-approvals-and-sandbox" not in argv
    bypass = codex.argv(request(auto_approve=True), None)
    assert "--dangerously-bypass-approvals-and-sandbox" in bypass and "--full-auto" not in bypass


def test_codex_declares_a_provider_for_a_base_url_only_with_a_key():
    assert provider_overrides({"OPENAI_BASE_URL": "http://127.0.0.1:9/x"}) == []
    overrides = provider_overrides(
        {"OPENAI_BASE_URL": "http://127.0.0.1:9/x", "CODEX_API_KEY": "stand-in"}
    )
    values = overrides[1::2]
    assert 'model_provider="console"' in values
    assert 'model_providers.console.base_url="http://127.0.0.1:9/x"' in values
    assert 'model_providers.console.env_key="CODEX_API_KEY"' in values


def test_opencode_runs_its_plan_agent_read_only_and_auto_approves_with_auto():
    opencode = OpenCodeProvider("o", {"command": sys.executable})
    read_only = opencode.argv(request(read_only=True, auto_approve=True))
    assert read_only[-2:] == ["--agent", "plan"] and "--auto" not in read_only
    assert opencode.argv(request(auto_approve=True))[-1] == "--auto"
    resumed = opencode.argv(request(session_id="ses_1"))
    assert resumed[resumed.index("--session") + 1] == "ses_1"


def test_gemini_plans_read_only_and_runs_yolo_when_auto():
    gemini = GeminiProvider("g", {"command": sys.executable})
    assert gemini.argv(request(read_only=True, auto_approve=True))[-2:] == [
        "--approval-mode",
        "plan",
    ]
    assert gemini.argv(request(auto_approve=True))[-1] == "yolo"
    assert "--approval-mode" not in gemini.argv(request())
