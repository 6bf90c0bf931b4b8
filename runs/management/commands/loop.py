"""manage.py loop — agents' tools (runs/loop_commands) and each loop kind's subcommands
(`LoopKind.loop_commands`: the step machine's create, tick, status, …); one module each."""

from console.cli import JsonErrorsCommand
from runs.loop_commands import every_command


class Command(JsonErrorsCommand):
    help = "Loops beyond workflows: step-machine recipes, driven loops, tools for agents."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for module in every_command():
            p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP + ".")
            module.add_arguments(p)
            p.set_defaults(handler=module.handle)

    def handle(self, *args, **options):
        return options["handler"](self, options)
