"""What the subcommands of `manage.py loop` share, the kernel's and each kind's: who acts
and how to print (text, or --json as the API says it)."""

from __future__ import annotations

import json

from django.core.management import CommandError
from ninja.responses import NinjaJSONEncoder

from runs.actor import Actor


def add_common(parser, *, user: bool = True) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON, as the API does")
    if user:
        parser.add_argument(
            "--user", default="", help="act as this account (default: the command line itself)"
        )


def actor(options) -> Actor:
    """Who the command acts as, as `manage.py run` decides it (`Actor.command_line`)."""
    from runs.errors import NotAllowed

    try:
        return Actor.command_line(options.get("user") or "")
    except NotAllowed as exc:
        raise CommandError(str(exc)) from None


def emit(command, options, data, text: str) -> None:
    if options.get("json"):
        command.stdout.write(json.dumps(data, indent=2, cls=NinjaJSONEncoder, ensure_ascii=False))
    else:
        command.stdout.write(text)
