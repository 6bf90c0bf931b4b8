"""What a recipe may say about the sandbox its processes run in: one definition for every
kind that starts processes.

    network: none | on        # steps and gate commands: may they use the network?
    limits: {cpu_seconds: 600, memory_mb: 2048, processes: 256}

`network` at the top of a recipe is the default of its steps (bash, `script:`,
`until_bash`, gate commands); without it the administrator's LOOP_SANDBOX_NETWORK
decides. Agents always get the network (their model's API) unless their own node says
`network: none`. `limits` may ask for less than the administrator allows, never more; a
node's limits replace the recipe's one by one.
"""

from __future__ import annotations

from typing import Any

from runs.sandbox.confinement import LIMIT_NAMES, administrator_limits

NETWORK_VALUES = {"on": True, "none": False, "off": False, True: True, False: False}


def clean_network(value: Any) -> bool:
    """`on` / `none` (YAML also reads `on` / `off` as booleans); ValueError otherwise."""
    key = value.strip().lower() if isinstance(value, str) else value
    if key not in NETWORK_VALUES:
        raise ValueError(f"network must be 'none' or 'on', not {value!r}")
    return NETWORK_VALUES[key]


def clean_limits(raw: Any) -> dict[str, int]:
    """The limits a recipe asked for; ValueError naming the first wrong one."""
    if not isinstance(raw, dict):
        raise ValueError("limits must be a mapping of " + ", ".join(LIMIT_NAMES))
    maximum = administrator_limits()
    cleaned = {}
    for name, value in raw.items():
        if name not in LIMIT_NAMES:
            raise ValueError(f"unknown limit {name!r}; the limits are {', '.join(LIMIT_NAMES)}")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"limits.{name} must be a whole number above 0, not {value!r}")
        if maximum[name] and value > maximum[name]:
            raise ValueError(
                f"limits.{name}: {value} is more than the administrator allows "
                f"({maximum[name]}, LOOP_SANDBOX_{name.upper()})"
            )
        cleaned[name] = value
    return cleaned


def check_sandbox_fields(raw: dict, path: str, ctx, out: dict) -> None:
    """Clean `network` and `limits` of `raw` into `out`, reporting each wrong one with its
    line (`ctx.error(path, message)`)."""
    from recipes.problems import child_path

    if raw.get("network") is not None:
        try:
            out["network"] = clean_network(raw["network"])
        except ValueError as exc:
            ctx.error(child_path(path, "network"), str(exc))
            out.pop("network", None)
    if raw.get("limits") is not None:
        try:
            out["limits"] = clean_limits(raw["limits"])
        except ValueError as exc:
            ctx.error(child_path(path, "limits"), str(exc))
            out.pop("limits", None)
