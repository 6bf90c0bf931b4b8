"""Rules about a workflow as a whole, run once its nodes (and included blocks) are known:
providers included blocks bring, `returns:`, and agent nodes nobody answers for."""

from __future__ import annotations

from recipes.formats.rule_context import RuleContext
from recipes.problems import child_path, short_repr
from runs.engine.shell_context import shell_report


def take_block_providers(cleaned: dict, ctx: RuleContext) -> None:
    """Inline providers an included block declares join this workflow's (its own win)."""
    blocks = ctx.block_providers
    if not blocks:
        return
    own = cleaned.get("providers")
    merged = dict(blocks)
    if isinstance(own, dict):
        merged.update(own)
    cleaned["providers"] = merged


def check_returns(cleaned: dict, ctx: RuleContext) -> None:
    returns = cleaned.get("returns")
    if not isinstance(returns, str):
        return
    aliases = ctx.aliases
    if returns in aliases:
        cleaned["returns"] = aliases[returns][1]
        return
    ids = {n.get("id") for n in cleaned["nodes"] if isinstance(n, dict)}
    if returns not in ids:
        ctx.error(
            "returns", f"returns names {short_repr(returns)}, which is not a node of this workflow"
        )


AGENT_KINDS = ("prompt", "command", "loop")


def _agent_nodes_without_provider(nodes: list, path: str):
    """(path, id) of each node, loop_group bodies included, that calls an agent it does not name."""
    for index, node in enumerate(nodes):
        if not isinstance(node, dict):
            continue
        node_path = child_path(path, index)
        if node.get("kind") in AGENT_KINDS and node.get("provider") is None:
            yield node_path, node.get("id")
        group = node.get("loop_group")
        if isinstance(group, dict) and isinstance(group.get("nodes"), list):
            body_path = child_path(child_path(node_path, "loop_group"), "nodes")
            yield from _agent_nodes_without_provider(group["nodes"], body_path)


def check_provider_named(cleaned: dict, ctx: RuleContext) -> None:
    """Without a provider named anywhere, say so here rather than let a run fail later."""
    if ctx.provider_fallback or cleaned.get("provider") is not None:
        return
    if cleaned.get("default_provider"):  # the repository's default assistant answers
        return
    unnamed = list(_agent_nodes_without_provider(cleaned["nodes"], "nodes"))
    if not unnamed:
        return
    (path, node_id), others = unnamed[0], [short_repr(i) for _, i in unnamed[1:]]
    also = f" (and {', '.join(others[:5])}{', ...' if len(others) > 5 else ''})" if others else ""
    ctx.error(
        path,
        f"node {short_repr(node_id)}{also} calls an agent, but no provider is named and no "
        "default provider is set: add `provider: NAME` at the top of the recipe or on the node "
        "(`provider: demo` is the built-in demo agent), or mark a provider as the default "
        "in the admin",
    )


def check_provider_commands(providers, ctx: RuleContext) -> None:
    """A command provider's script gets the run's values in its environment (USER_MESSAGE,
    ...): the same places are refused there as in bash steps."""
    if not isinstance(providers, dict):
        return
    for name, declared in providers.items():
        if isinstance(declared, dict) and isinstance(declared.get("command"), str):
            path = child_path(child_path("providers", name), "command")
            label = f"provider {short_repr(name)}"
            errors, warnings = shell_report(ctx.lines, path, declared["command"], label)
            ctx.errors.extend(errors)
            ctx.warnings.extend(warnings)
