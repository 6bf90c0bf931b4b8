"""`manage.py loop stop ID`: cancel a step-machine run (its agents are stopped)."""

from django.core.management import CommandError

from runs import services
from runs.loop_commands.common import actor, add_common, emit

from ..queries import status_of
from ._common import status_text, step_machine_run

NAME = "stop"
HELP = "Cancel and stop a step-machine run"


def add_arguments(parser):
    parser.add_argument("run_id", type=int, metavar="ID")
    parser.add_argument("--reason", default="", help="why; kept on the run")
    add_common(parser)


def handle(command, options):
    run = step_machine_run(options["run_id"])
    try:
        services.cancel_run(run, actor(options), reason=options["reason"])
    except services.ServiceError as exc:
        raise CommandError(str(exc)) from None
    run.refresh_from_db()
    data = status_of(run)
    emit(command, options, data, status_text(data))
