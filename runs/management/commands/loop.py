"""manage.py loop — step machines, driven loops and agents' tools; one module per
subcommand in runs/loop_commands."""

from console.cli import JsonErrorsCommand
from runs.loop_commands import discover


class Command(JsonErrorsCommand):
    help = "Loops beyond workflows: step-machine recipes, driven loops, tools for agents."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for module in discover():
            p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP + ".")
            module.add_arguments(p)
            p.set_defaults(handler=module.handle)

    def handle(self, *args, **options):
        return options["handler"](self, options)
