"""A read-only role starts its agent read-only where the CLI can; auto_approve lets a
writing role's agent act without asking."""

import sys
from pathlib import Path

from runs.providers.base import AgentRequest
from runs.providers.claude import ClaudeProvider
from runs.providers.codex import CodexProvider

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
