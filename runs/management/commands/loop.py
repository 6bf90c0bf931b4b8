"""manage.py loop — agents' tools (runs/loop_commands) and each loop kind's subcommands
(`LoopKind.loop_commands`: the step machine's create, tick, status, …); one module each."""

from django.contrib.auth import get_user_model
from django.core.management import CommandError

from console.cli import JsonErrorsCommand
from runs.loop_commands import every_command
from runs.models import Run


class Command(JsonErrorsCommand):
    help = "Loops beyond workflows: step-machine recipes, driven loops, tools for agents."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
        for module in every_command():
            p = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP + ".")
            module.add_arguments(p)
            p.set_defaults(handler=module.handle)

    def handle(self, *args, **options):
        hide_unseen_run(options)
        return options["handler"](self, options)


def hide_unseen_run(options) -> None:
    """A subcommand on one run (`run_id`) acting as `--user`: a run of a project that
    account sees nothing of is answered as one that does not exist, whatever the
    subcommand (as `manage.py run` answers it)."""
    run_id, username = options.get("run_id"), options.get("user")
    if run_id is None or not username:
        return
    user = get_user_model().objects.filter(username=username).first()
    if user is None:
        return  # the subcommand says there is no such user
    if not Run.objects.visible_to(user).filter(pk=run_id).exists():
        raise CommandError(f"No run {run_id}")
