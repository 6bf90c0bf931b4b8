"""manage.py audit decisions — every answer at a gate as JSON Lines or CSV (runs.audit)."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime

from runs import audit


def _when(text: str, name: str):
    if not text:
        return None
    parsed = parse_datetime(text if "T" in text or " " in text else text + "T00:00:00+00:00")
    if parsed is None:
        raise CommandError(f"--{name}: not a date or a time (say 2026-12-01 or 2026-12-01T09:30Z)")
    return parsed


class Command(BaseCommand):
    help = "Export the decisions made at gates (who, which, on which digest, from where)."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="what", required=True, metavar="WHAT")
        found = sub.add_parser("decisions", help="every answer at a gate, oldest first")
        found.add_argument("--since", default="", help="at or after this date or time")
        found.add_argument("--until", default="", help="before this date or time")
        found.add_argument("--recipe", default="", help="only this recipe's runs (its slug)")
        found.add_argument("--project", default="", help="only this project's runs (its slug)")
        found.add_argument("--format", choices=audit.FORMATS, default="jsonl")

    def handle(self, *args, **options):
        answers = audit.decisions(
            since=_when(options["since"], "since"),
            until=_when(options["until"], "until"),
            recipe=options["recipe"],
            project=options["project"],
        )
        for line in audit.lines(answers, options["format"]):
            self.stdout.write(line, ending="")
