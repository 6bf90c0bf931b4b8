"""`manage.py loop tool NAME ...`: call one of the console's tools from an agent's shell.

Only an agent's process can: the worker serving its call set LOOP_TOOL_SOCKET, and then
manage.py hands the command to runs.agent_tools.client before Django starts. Reaching
this module means that variable is missing."""

from django.core.management import CommandError

NAME = "tool"
HELP = "Call a console tool from an agent's process (needs LOOP_TOOL_SOCKET)"


def add_arguments(parser):
    parser.add_argument("name", nargs="?", help="the tool (see --list)")
    parser.add_argument("rest", nargs="*", help="--argument value ...")
    parser.add_argument("--list", action="store_true", help="list the tools of this call")


def handle(command, options):
    raise CommandError(
        "LOOP_TOOL_SOCKET is not set: `loop tool` works from inside an agent's process, "
        "where the worker running the agent serves its tools."
    )
