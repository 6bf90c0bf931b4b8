"""manage.py mcp [--user NAME]: the orchestration MCP server on stdin/stdout (the tools of
runs.orchestration: list and read runs and gates, decide gates, start and cancel runs),
for a person's or an orchestrating agent's MCP client outside any run. Over HTTP the same
server answers at /mcp with an API token. Not `manage.py loop mcp`
(runs/loop_commands/mcp.py): that one serves a running agent its own call's tools, from
inside the agent's process."""

import anyio
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.actor import os_user
from runs.orchestration.tools import Caller, CallerOf, build_server


class Command(BaseCommand):
    help = (
        "Orchestrate the console over MCP on stdin/stdout: list and read runs and gates, "
        "decide gates, start and cancel runs, acting as --user (for an MCP client outside "
        "any run; over HTTP the same server is /mcp). Not `manage.py loop mcp`, which "
        "serves a running agent the tools of its own call."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--user",
            default="",
            help="act as this account, with its role (default: the account named like "
            "your OS user, else the command line itself)",
        )

    def handle(self, *args, **options):
        caller = self._caller(options["user"])
        server = build_server(CallerOf(caller))
        anyio.run(server.run_stdio_async)

    def _caller(self, name: str) -> Caller:
        accounts = get_user_model().objects
        if name:
            user = accounts.filter(username=name, is_active=True).first()
            if user is None:
                raise CommandError(f"No active user '{name}'")
            if not user.has_perm("runs.view_run"):
                raise CommandError(f"{name} has no role: give them the viewer role or more")
            return Caller(user)
        # Like `manage.py run`: the account named like the OS user when it may operate,
        # else the command line itself ("mcp (<os user>)" on every page).
        os_name = os_user()
        account = accounts.filter(username=os_name, is_active=True).first() if os_name else None
        if account is not None and account.has_perm("runs.operate_run"):
            return Caller(account)
        return Caller(None, label=f"mcp ({os_name})" if os_name else "mcp")
