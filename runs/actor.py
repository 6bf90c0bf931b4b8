"""Who acts on a run, and through which surface.

Built once at the edge (a view, an API endpoint, the CLI, the MCP server, the engine, the
sweep) and passed down, so "who decided" and "who cancelled" read the same on every page, in the API, the
CLI and the admin. `Actor.operator` is where the permission to operate is checked.
"""

from __future__ import annotations

import getpass
from dataclasses import dataclass

from runs.errors import NotAllowed

SURFACES = (
    "console",
    "api",
    "cli",
    "mcp",
    "engine",
    "sweep",
    "agent",
    "schedule",
    "webhook",
    "link",
    "slack",
)
# What a decision or cancel without a person reads as, per surface.
NO_PERSON = {
    "console": "console",
    "api": "api",
    "cli": "command line",
    "mcp": "mcp",  # the orchestration MCP server (runs.orchestration), stdio without --user
    "engine": "the engine",
    "sweep": "the sweep",
    "agent": "an agent",  # a tool call from an agent's process (never a gate decision)
    "schedule": "a schedule",  # a recipe's schedule (triggers), named in its label
    "webhook": "a webhook",  # a recipe's inbound webhook (triggers), named in its label
    "link": "a decision link",  # a signed link from a notification, for its named person
    "slack": "slack",  # a button of a gate's Slack message, for the mapped person
}


# What a person must hold on an object to know it exists (else it reads as missing).
SEEN_WITH = {"recipes.recipe": "recipes.view_recipe", "runs.run": "runs.view_run"}


def os_user() -> str:
    """The name of the OS account running this process ("" for a uid without a name, as in a
    bare container)."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return ""


def can_operate(user) -> bool:
    return bool(user and user.is_authenticated and user.has_perm("runs.operate_run"))


@dataclass(frozen=True)
class Actor:
    surface: str
    user: object | None = None
    # What an actor without a person reads as instead of the surface's word, e.g.
    # "cli (alice)" for the command line typed by the OS user alice.
    label: str = ""
    # Whose permissions an actor without a person acts with: a schedule, its author's (an
    # anonymous user once they are gone); a webhook, an anonymous user's (nobody's). None:
    # the person's own, or for the command line, all (it is trusted).
    acting_for: object | None = None

    def __post_init__(self):
        if self.surface not in SURFACES:
            raise ValueError(f"unknown surface {self.surface!r}")

    @classmethod
    def operator(cls, user, surface: str) -> Actor:
        """An actor allowed to start, cancel, resume and decide; NotAllowed otherwise."""
        if not can_operate(user):
            raise NotAllowed("You need the operator role to do this.")
        return cls(surface, user)

    @classmethod
    def command_line(cls, username: str = "") -> Actor:
        """Who a `manage.py run` or `manage.py loop` command acts as: the account `--user`
        names (which must operate), else the account named like the OS user when it may
        operate, else the command line itself, "cli (<os user>)" on every page."""
        from django.contrib.auth import get_user_model

        accounts = get_user_model().objects
        if username:
            user = accounts.filter(username=username).first()
            if user is None:
                raise NotAllowed(f"No user '{username}'")
            return cls.operator(user, "cli")
        os_name = os_user()
        account = accounts.filter(username=os_name).first() if os_name else None
        label = f"cli ({os_name})" if os_name else "cli"
        return cls("cli", account if can_operate(account) else None, label=label)

    @property
    def person(self):
        """The user to record (None for the engine, the sweep or an anonymous script)."""
        user = self.user
        return user if user is not None and user.is_authenticated else None

    @property
    def rights(self):
        """The account whose permissions a start is checked with (None: the trusted
        command line's)."""
        return self.acting_for if self.acting_for is not None else self.person

    def check(self, perm: str, obj) -> None:
        """The person's right to `perm` on `obj` (a run, a recipe) in its project
        (console.projects): NotFound — worded as for one that does not exist — when they
        may not even see it there, NotAllowed when they may see it but not do this. An
        actor without a person (the engine, the sweep, a schedule or webhook their editors
        set up, the trusted command line) is checked where it is made."""
        from runs.errors import NotFound

        person = self.person
        if person is None:
            return
        label = type(obj)._meta.label_lower
        if not person.has_perm(SEEN_WITH.get(label, "runs.view_run"), obj):
            what = f"recipe '{obj.slug}'" if label == "recipes.recipe" else f"run {obj.pk}"
            raise NotFound(f"No {what}.")
        if not person.has_perm(perm, obj):
            raise NotAllowed("Your role in this project does not allow this.")

    @property
    def name(self) -> str:
        person = self.person
        if person is not None:
            return person.get_username()
        return self.label or NO_PERSON[self.surface]


ENGINE = Actor("engine")
SWEEP = Actor("sweep")
# The sweep taking a gate's `timeout_decision`: the decision reads "by the deadline".
DEADLINE = Actor("sweep", label="the deadline")
