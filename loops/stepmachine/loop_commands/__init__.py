"""The step machine's `manage.py loop` subcommands, its `LoopKind.loop_commands`: each
module as runs/loop_commands' own (NAME, HELP, `add_arguments`, `handle`)."""

from . import create, handoff, recipe, status, stop, tick

COMMANDS = {module.NAME: module for module in (create, handoff, recipe, status, stop, tick)}
