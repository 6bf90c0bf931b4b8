"""manage.py api_token create USER [--name N] [--scope S] [--project SLUG ...]
[--expires-in-days D | --no-expiry] | list [--user U] | revoke ID"""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from console.models import DEFAULT_LIFETIME, ApiToken, Project
from console.projects import projects_where


class Command(BaseCommand):
    help = "Create, list and revoke API tokens. A new token's secret is printed once."

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a token for USER and print its secret")
        create.add_argument("username")
        create.add_argument("--name", default="", help="what the token is for")
        create.add_argument(
            "--scope",
            choices=ApiToken.Scope.values,
            default=ApiToken.Scope.EDIT,
            help="read: look only; operate: also start, cancel, resume and decide at gates;"
            " edit: everything the user's role allows (default); metrics: /metrics only",
        )
        create.add_argument(
            "--project",
            action="append",
            default=[],
            metavar="SLUG",
            help="only this project (repeat for several; default: every project the user may see)",
        )
        lifetime = create.add_mutually_exclusive_group()
        lifetime.add_argument(
            "--expires-in-days",
            type=int,
            default=DEFAULT_LIFETIME.days,
            help=f"days until the token stops working (default {DEFAULT_LIFETIME.days})",
        )
        lifetime.add_argument("--no-expiry", action="store_true", help="a token that never expires")
        listing = sub.add_parser("list", help="List tokens (never their secrets)")
        listing.add_argument("--user", default="", help="only this user's tokens")
        revoke = sub.add_parser("revoke", help="Revoke a token by its id")
        revoke.add_argument("token_id", type=int)

    def handle(self, *args, **options):
        getattr(self, f"do_{options['action']}")(options)

    def do_create(self, options):
        user_model = get_user_model()
        try:
            user = user_model.objects.get(**{user_model.USERNAME_FIELD: options["username"]})
        except user_model.DoesNotExist:
            raise CommandError(f"No user '{options['username']}'") from None
        expires_at = None
        if not options["no_expiry"]:
            if options["expires_in_days"] < 1:
                raise CommandError("--expires-in-days must be at least 1 (or use --no-expiry)")
            expires_at = timezone.now() + timedelta(days=options["expires_in_days"])
        projects = _projects(user, options["project"])
        with transaction.atomic():
            token, secret = ApiToken.issue(
                user, name=options["name"], scope=options["scope"], expires_at=expires_at
            )
            token.projects.set(projects)
        only = f", only {', '.join(p.slug for p in projects)}" if projects else ""
        self.stderr.write(
            f"Token {token.pk} for {user}, scope {token.scope}{only}, {token.state}."
            " Copy the secret now; it is not stored:"
        )
        self.stdout.write(secret)

    def do_list(self, options):
        tokens = ApiToken.objects.select_related("user").prefetch_related("projects")
        if options["user"]:
            tokens = tokens.filter(user__username=options["user"])
        for token in tokens:
            used = f"{token.last_used_at:%Y-%m-%d %H:%M}" if token.last_used_at else "never"
            self.stdout.write(
                f"{token.pk:>5}  {token.prefix}…  {token.user.get_username():<16} "
                f"{token.name or '-':<20} {token.scope:<8} {token.state:<24} last used {used}"
                + _only(token)
            )

    def do_revoke(self, options):
        token = ApiToken.objects.filter(pk=options["token_id"]).first()
        if token is None:
            raise CommandError(f"No token {options['token_id']}")
        if not token.revoke():
            raise CommandError(f"Token {token.pk} was already revoked at {token.revoked_at}")
        self.stdout.write(f"Revoked token {token.pk} ({token.prefix}…)")


def _projects(user, slugs: list[str]) -> list[Project]:
    """The projects `--project` names, each one where the user may read runs (a token for
    a project they have nothing in would read nothing)."""
    found = []
    for slug in dict.fromkeys(slugs):
        project = Project.objects.filter(slug=slug).first()
        if project is None:
            raise CommandError(f"No project '{slug}'")
        if not projects_where(user, "runs.view_run").filter(pk=project.pk).exists():
            raise CommandError(f"{user} has no role in project '{slug}'")
        found.append(project)
    return found


def _only(token) -> str:
    slugs = [project.slug for project in token.projects.all()]
    return f"  only {', '.join(slugs)}" if slugs else ""
