"""Shared ground of the workflow rules: the fields each part of a recipe may have, and the
:class:`RuleContext` rules report on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from recipes.formats.resources import Resources
from recipes.problems import LineMap, Problem, child_path

KIND_KEYS = (
    "bash",
    "prompt",
    "command",
    "script",
    "workflow",
    "loop",
    "loop_group",
    "approval",
    "cancel",
)
# Node kinds other tools define that Loop Console does not run.
UNSUPPORTED_KIND_KEYS = tuple(
    "fan_in parallel map for_each foreach sub_workflow "
    "subworkflow switch router http webhook python".split()
)
# Fields a node of one kind has besides the common ones (checked by that kind's rules).
KIND_FIELDS = {
    "script": frozenset({"runtime", "deps", "with"}),
    "command": frozenset({"with"}),
    "workflow": frozenset({"input", "with", "fan_out", "isolation"}),
}
# Common fields that mean nothing where no agent is called: warned about and dropped.
AGENT_ONLY_FIELDS = ("provider", "model", "output_format", "idle_timeout")
COMMON_NODE_FIELDS = frozenset(
    "id depends_on when trigger_rule provider model output_format idle_timeout timeout "
    "retry always_run network limits".split()
)
# Fields other tools understand; Loop Console accepts them but does nothing with them.
FOREIGN_NODE_FIELDS = frozenset(
    "effort thinking agents output_type sandbox worktree mutates_checkout persist_session "
    "allowed_tools denied_tools hooks mcp skills context with returns fallback_model betas "
    "fallbackModel maxBudgetUsd systemPrompt settingSources isolation "
    "max_budget_usd system_prompt settings_sources max_turns env".split()
)
LOOP_DISCARDED_FIELDS = ("hooks", "mcp", "skills", "allowed_tools", "denied_tools", "context")
TOP_LEVEL_FIELDS = frozenset(
    {
        "name",
        "description",
        "interactive",
        "provider",
        "model",
        "providers",
        "inputs",
        "budget",
        "nodes",
        "returns",
        "approvers",
        "unattended",
        "network",
        "limits",
    }
)
# A gate deadline's escalation and its own decision (runs.engine.deadlines), beside
# gate_timeout / on_timeout wherever a gate is declared.
DEADLINE_FIELDS = ("escalate_to", "escalate_after", "timeout_decision")
# A gate's declared decisions and its quorum (recipes.formats.field_rules.check_decisions).
DECISION_FIELDS = ("decisions", "approvals")
_CONTROL_FIELDS = (
    "until",
    "until_bash",
    "max_iterations",
    "fresh_context",
    "interactive",
    "gate_message",
    "signal_completes",
    "gate_timeout",
    "on_timeout",
    *DEADLINE_FIELDS,
    *DECISION_FIELDS,
)
LOOP_FIELDS = frozenset({"prompt", "command", "until_field", "score", "stop", *_CONTROL_FIELDS})
GROUP_FIELDS = frozenset({"nodes", *_CONTROL_FIELDS})
INPUT_FIELDS = frozenset({"type", "label", "description", "required", "default", "options"})
APPROVAL_FIELDS = frozenset(
    {
        "message",
        "capture_response",
        "gate_timeout",
        "on_timeout",
        *DEADLINE_FIELDS,
        *DECISION_FIELDS,
    }
)

ID_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
KIND_LIST = ", ".join(KIND_KEYS)


@dataclass
class RuleContext:
    lines: LineMap
    commands_dirs: tuple[Path, ...] = ()
    resources: Resources = field(default_factory=Resources)
    # The files that include this one, outermost first (cycles and depth of `include:`).
    include_chain: tuple[str, ...] = ()
    # Top-level include ids -> (the block's last nodes, the node giving its output), and
    # the inline providers included blocks declare.
    aliases: dict[str, tuple[list[str], str]] = field(default_factory=dict)
    block_providers: dict[str, Any] = field(default_factory=dict)
    workflow_interactive: bool = False
    # `unattended: true`: no gate may wait in its runs (the node rule refuses each).
    workflow_unattended: bool = False
    # Whether something answers for agent nodes that name no provider (a default provider
    # configured in the admin or the settings); when not, such a recipe cannot run.
    provider_fallback: bool = True
    # Why a provider name (None: the default) cannot answer, or None when it can: given by
    # validation (runs.providers.registry.unresolvable) for formats without inline providers.
    provider_check: Any = None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def error(self, path: str, message: str) -> None:
        self.errors.append(self.lines.problem(path, cap(message)))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(self.lines.problem(path, cap(message)))

    @staticmethod
    def is_derived(path: str) -> bool:
        """Paths pydantic may complain about that the author never wrote."""
        return path.endswith("].kind") and not path.startswith("providers.")


def cap(message: str, limit: int = 500) -> str:
    return message if len(message) <= limit else message[: limit - 3] + "..."


def is_blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def require_text(raw: dict, key: str, path: str, ctx: RuleContext, missing: str) -> None:
    """Error when ``key`` is absent, null or blank (other types are pydantic's job)."""
    value = raw.get(key)
    if value is None:
        ctx.error(child_path(path, key), missing)
    elif is_blank(value):
        ctx.error(child_path(path, key), "must not be empty")


def drop_nulls(raw: dict, keep: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in raw.items() if v is not None or k in keep}
