"""Hooks a driven recipe may use as they are, and examples to copy into your own module
(add its package to LOOP_HOOK_MODULES). Each takes the context dict of its moment."""

from __future__ import annotations

import logging

log = logging.getLogger("loops.driven.hooks")


def log_event(ctx: dict) -> None:
    """Any moment: write the context to the worker's log."""
    log.info("driven loop %s: %s", ctx.get("loopId"), ctx)


def first_line_only(ctx: dict) -> dict | None:
    """on_iteration_end: show the host only the first line of a text output (the stored
    iteration keeps all of it)."""
    output = ctx.get("output")
    if isinstance(output, str) and "\n" in output.strip():
        return {"output": output.strip().splitlines()[0]}
    return None


def retry_iteration(ctx: dict) -> str:
    """on_error: run the iteration's pipeline again, as often as the loop's `retry` allows;
    past that, the loop fails."""
    return "retry"


def recover_with_error(ctx: dict) -> dict:
    """on_error: do not stop; the error message becomes the iteration's output, so the
    host can read what went wrong and decide."""
    return {"action": "recover", "output": f"(the pipeline failed: {ctx.get('error')})"}
