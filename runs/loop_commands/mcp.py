"""`manage.py loop mcp`: the MCP stdio server an agent's CLI starts while the agent runs,
serving that call's tools (runs/agent_tools/relay/loop_tools.py answers it, before Django
starts). Not `manage.py mcp` (runs/management/commands/mcp.py), the orchestration server
for clients outside any run."""

from django.core.management import CommandError

NAME = "mcp"
HELP = (
    "Serve a running agent the tools of its own call over MCP on stdin/stdout (from the "
    "agent's process, needs LOOP_TOOL_SOCKET); to orchestrate runs and gates from outside "
    "a run, `manage.py mcp`"
)


def add_arguments(parser):
    pass


def handle(command, options):
    raise CommandError(
        "LOOP_TOOL_SOCKET is not set: the MCP server runs inside an agent's process, started "
        "by its CLI with the environment the worker gave it."
    )
