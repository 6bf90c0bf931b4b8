"""`manage.py loop tick ID`: run the current step and auto-advance (at most ten ticks)."""

from django.core.management import CommandError

from runs import services
from runs.loop_commands.common import actor, add_common, emit

from ..queries import status_of
from ._common import status_text, step_machine_run

NAME = "tick"
HELP = "Execute a step-machine run's current step and auto-advance (at most ten steps)"


def add_arguments(parser):
    parser.add_argument("run_id", type=int, metavar="ID")
    add_common(parser)


def handle(command, options):
    from loops.stepmachine import services as step_machine

    run = step_machine_run(options["run_id"])
    try:
        report = step_machine.tick(run, actor(options), inline=True)
    except services.ServiceError as exc:
        raise CommandError(str(exc)) from None
    run.refresh_from_db()
    data = status_of(run)
    if report is None:
        data["tick"] = {"ticks": 0, "steps": [], "stopped": "the run was started"}
        head = "started: its worker runs the first steps"
    else:
        data["tick"] = {"ticks": report.ticks, "steps": report.steps, "stopped": report.stopped}
        head = f"{report.ticks} tick(s): {', '.join(report.steps) or 'none'}"
        if report.stopped:
            head += f"; stopped: {report.stopped}"
    emit(command, options, data, head + "\n" + status_text(data))
