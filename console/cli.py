"""What the console's commands share: with `--json`, a refusal is JSON too.

`manage.py run|loop|recipe ... --json` prints its answer as the API does; an error then
prints `{"detail": "..."}` on stdout (the API's shape), nothing on stderr, and exits 1, so a
script reads one format whatever happens. Without `--json`, Django's `CommandError: ...`
line on stderr, as ever. `call_command` (tests, other code) still gets the CommandError.
"""

from __future__ import annotations

import json
import sys

from django.core.management.base import BaseCommand, CommandError


class JsonErrorsCommand(BaseCommand):
    _from_command_line = False

    def run_from_argv(self, argv):
        self._from_command_line = True
        return super().run_from_argv(argv)

    def execute(self, *args, **options):
        if not (self._from_command_line and options.get("json")):
            return super().execute(*args, **options)
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if options.get("traceback"):
                raise
            self.stdout.write(json.dumps({"detail": str(exc)}, ensure_ascii=False))
            sys.exit(exc.returncode)
