"""manage.py unlock_login [USER] [--address ADDR]: lift a sign-in lock (console/throttle.py)
before its window ends, e.g. for a person who mistyped their password five times."""

import math

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from redis.exceptions import RedisError

from console import throttle


class Command(BaseCommand):
    help = (
        "Lift the sign-in lock of an account (the name as typed at the login page) or a client "
        "address: forget the failed sign-ins counted against it."
    )

    def add_arguments(self, parser):
        parser.add_argument("username", nargs="?", default="", help="the account's name")
        parser.add_argument(
            "--address",
            default="",
            help="a client address, as the console sees it (the connection's peer; the "
            "proxy's client with BEHIND_PROXY; 'forwarded' for requests naming one themselves)",
        )

    def handle(self, *args, username="", address="", **options):
        if not (username or address):
            raise CommandError("Name the account (USER), the address (--address ADDR), or both.")
        if throttle.kept_in_process_memory():
            minutes = math.ceil(settings.LOOP_LOGIN_LOCKOUT_SECONDS / 60)
            raise CommandError(
                "Without REDIS_URL (the embedded default) the sign-in lock is kept in the web "
                "server's memory, which this command cannot reach: restart the web server "
                f"(Ctrl-C, then `make run`) to lift every lock, or wait {minutes} minutes "
                "(LOOP_LOGIN_LOCKOUT_SECONDS) from the first failure."
            )
        try:
            lifted = throttle.lift(username, address)
        except (RedisError, OSError) as exc:
            raise CommandError(
                f"The sign-in locks are kept in Redis (REDIS_URL), which did not answer ({exc}): "
                "nothing was lifted; try again once it is back."
            ) from None
        for what, failures in lifted.items():
            if failures:
                self.stdout.write(
                    f"{what}: {failures} failed sign-ins forgotten; the lock is lifted."
                )
            else:
                self.stdout.write(f"{what}: no failed sign-ins counted; nothing was locked.")
