"""What the console's commands share: with `--json`, a refusal is JSON too.

`manage.py run|loop|recipe ... --json` prints its answer as the API does; an error then
prints `{"detail": "..."}` on stdout (the API's shape), nothing on stderr, and exits 1, so a
script reads one format whatever happens. Without `--json`, Django's `CommandError: ...`
line on stderr, as ever. `call_command` (tests, other code) still gets the CommandError.

A decision (approve, reject, a handoff, a tick...) is done once it is committed: when the
broker could not take the message that follows it, the command still succeeds and warns
on stderr that the sweep will send it (runs.dispatch.noting_unsent).
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
        from runs import dispatch

        with dispatch.noting_unsent() as unsent:
            result = self._execute(*args, **options)
        if unsent:
            names = ", ".join(sorted({name for name, _ in unsent}))
            self.stderr.write(
                f"warning: done, but the broker is out of reach: the follow-up message "
                f"({names}) was not sent; the sweep sends it once the broker is back"
            )
        return result

    def _execute(self, *args, **options):
        if not (self._from_command_line and options.get("json")):
            return super().execute(*args, **options)
        try:
            return super().execute(*args, **options)
        except CommandError as exc:
            if options.get("traceback"):
                raise
            self.stdout.write(json.dumps({"detail": str(exc)}, ensure_ascii=False))
            sys.exit(exc.returncode)
