"""`manage.py loop mcp`: the MCP stdio server an agent's CLI starts (see agent_tools.mcp)."""

from django.core.management import CommandError

NAME = "mcp"
HELP = "Serve the console's tools over MCP on stdin/stdout (from an agent's process)"


def add_arguments(parser):
    pass


def handle(command, options):
    raise CommandError(
        "LOOP_TOOL_SOCKET is not set: the MCP server runs inside an agent's process, started "
        "by its CLI with the environment the worker gave it."
    )
