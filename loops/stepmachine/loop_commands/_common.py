"""The step machine's `manage.py loop` subcommands (its `LoopKind.loop_commands`): create,
tick, status, stop, handoff, recipe. What they share beyond the kernel's
runs.loop_commands.common: which run, and how a machine's status reads."""

from __future__ import annotations

from django.core.management import CommandError

from runs.models import Run


def step_machine_run(run_id: int) -> Run:
    run = Run.objects.select_related("recipe", "recipe_version").filter(pk=run_id).first()
    if run is None:
        raise CommandError(f"No run {run_id}")
    if run.recipe.kind != "planeai":
        raise CommandError(
            f"Run {run_id} is a {run.recipe.kind} run, not a step machine (see manage.py run)"
        )
    return run


def status_text(data: dict) -> str:
    step = data["current_step"]
    lines = [
        f"run {data['id']}: {data['status']} — {data['meaning']}",
        f"  step:   {step['id']} ({step['kind']})" if step else "  step:   (not started)",
        f"  round:  {data['round']} of at most {data['max_rounds']}",
        f"  ticks:  {data['ticks']} of at most {data['max_ticks']}",
    ]
    if data["waiting"]:
        lines.append(f"  waiting: {data['waiting']}")
    if data["stale"]:
        lines.append(f"  stale: no progress since {data['last_progress_at']}")
    if data["error"]:
        lines.append(f"  error:  {data['error']}")
    for session in data["sessions"]:
        lines.append(
            f"  session {session['role']} #{session['session']}: {session['status']}, "
            f"{session['turns']} turn(s)"
            + (f", on {session['branch']}" if session["branch"] else "")
        )
    review = data["review"]
    if review:
        lines.append(
            f"  review: {review['branch']} → {review['target_branch']} ({review['status']})"
        )
    return "\n".join(lines)
