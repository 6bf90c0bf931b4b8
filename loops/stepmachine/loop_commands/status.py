"""`manage.py loop status ID`: status, current step, round and ticks of a step machine."""

from runs.loop_commands.common import add_common, emit

from ..queries import status_of
from ._common import status_text, step_machine_run

NAME = "status"
HELP = "Show a step-machine run: status, current step, round, ticks, sessions"


def add_arguments(parser):
    parser.add_argument("run_id", type=int, metavar="ID")
    add_common(parser, user=False)


def handle(command, options):
    data = status_of(step_machine_run(options["run_id"]))
    emit(command, options, data, status_text(data))
