"""Create the first admin account when there is no user yet; print its password once."""

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from console.roles import ROLES


class Command(BaseCommand):
    help = "Create an 'admin' superuser if no user exists, and print its password once."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="admin")

    def handle(self, *args, **options):
        User = get_user_model()
        if User.objects.exists():
            self.stdout.write("accounts exist; log in with yours")
            return
        password = secrets.token_urlsafe(12)
        user = User.objects.create_superuser(options["username"], "", password)
        user.groups.set(Group.objects.filter(name__in=list(ROLES)))
        self.stdout.write(
            self.style.SUCCESS(
                f"created the first account — username: {options['username']}  password: {password}\n"
                "(shown only this once; change it under /admin/)"
            )
        )
