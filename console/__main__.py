"""The console's command line: `manage.py ...` in a checkout, `loop-console ...` or
`python -m console ...` for an installed copy; the same commands either way."""

import os
import sys


def main() -> None:
    # An agent calling the console's tools (`loop tool ...`, `loop handoff ...`, `loop mcp`)
    # talks to its worker's socket: no settings, no database, nothing secret needed.
    if sys.argv[1:2] == ["loop"] and os.environ.get("LOOP_TOOL_SOCKET"):
        from runs.agent_tools.relay import loop_tools

        if sys.argv[2:3] and sys.argv[2] in loop_tools.SUBCOMMANDS:
            sys.exit(loop_tools.main(sys.argv[2:]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
