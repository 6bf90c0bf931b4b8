"""What the step-machine subcommands of `manage.py loop` share: who acts, which run, how
to print (text, or --json as the API says it)."""

from __future__ import annotations

import json

from django.core.management import CommandError
from ninja.responses import NinjaJSONEncoder

from runs.actor import Actor
from runs.models import Run


def add_common(parser, *, user: bool = True) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON, as the API does")
    if user:
        parser.add_argument(
            "--user", default="", help="act as this account (default: the command line itself)"
        )


def actor(options) -> Actor:
    """Who the command acts as, as `manage.py run` decides it (`Actor.command_line`)."""
    from runs.errors import NotAllowed

    try:
        return Actor.command_line(options.get("user") or "")
    except NotAllowed as exc:
        raise CommandError(str(exc)) from None


def step_machine_run(run_id: int) -> Run:
    run = Run.objects.select_related("recipe", "recipe_version").filter(pk=run_id).first()
    if run is None:
        raise CommandError(f"No run {run_id}")
    if run.recipe.kind != "planeai":
        raise CommandError(
            f"Run {run_id} is a {run.recipe.kind} run, not a step machine (see manage.py run)"
        )
    return run


def emit(command, options, data, text: str) -> None:
    if options.get("json"):
        command.stdout.write(json.dumps(data, indent=2, cls=NinjaJSONEncoder, ensure_ascii=False))
    else:
        command.stdout.write(text)


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
