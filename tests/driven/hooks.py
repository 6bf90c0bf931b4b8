"""Hooks the driven-loop tests name (tests.driven is in LOOP_HOOK_MODULES when testing).

Each records its call, with the crumb the run's log held last at that moment, in a file
of the data folder that worker and test share (one file per loop)."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings


def calls_dir() -> Path:
    return Path(settings.LOOP_DATA_DIR) / "hook-calls"


def calls(loop_id: int) -> list[dict]:
    path = calls_dir() / f"{loop_id}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def _record(hook: str, ctx: dict) -> None:
    from loops.driven.models import Loop
    from runs.models import RunEvent

    run_id = Loop.objects.filter(pk=ctx["loopId"]).values_list("run_id", flat=True).first()
    last = (
        RunEvent.objects.filter(run_id=run_id, kind__startswith="loop:")
        .order_by("-seq")
        .values_list("kind", flat=True)
        .first()
    )
    calls_dir().mkdir(parents=True, exist_ok=True)
    with (calls_dir() / f"{ctx['loopId']}.jsonl").open("a") as out:
        out.write(json.dumps({"hook": hook, "ctx": ctx, "last_crumb": last}) + "\n")


def on_init(ctx):
    _record("on_init", ctx)


def on_iteration_start(ctx):
    _record("on_iteration_start", ctx)


def on_iteration_end(ctx):
    _record("on_iteration_end", ctx)


def on_error(ctx):
    _record("on_error", ctx)  # returns nothing: the error stands, the loop fails


def on_finish(ctx):
    _record("on_finish", ctx)


def replace_output(ctx):
    _record("on_iteration_end", ctx)
    return {"output": f"REPLACED {ctx['iteration']}"}


def recover(ctx):
    _record("on_error", ctx)
    return {"action": "recover", "output": "substitute"}


def retry(ctx):
    _record("on_error", ctx)
    return "retry"


def give_up(ctx):
    _record("on_error", ctx)
    return {"action": "fail", "reason": "not worth another try"}


def no_budget(ctx):
    raise ValueError("no budget left")


def broken_finish(ctx):
    _record("on_finish", ctx)
    raise RuntimeError("the report could not be sent")
