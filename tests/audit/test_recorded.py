"""Each kind of the audit log is written by the code path that makes the change: the login
page, the admin, a management command, a membership saved, a token issued and revoked, a
recipe saved in the admin. Who acted is the request's person (with its address), or, with
no request, the command line."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management import call_command
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from console.audit import command_line
from console.models import ApiToken, AuditEvent, Membership, Project
from tests.conftest import ROOT, _database_url, make_user

pytestmark = pytest.mark.django_db

Kind = AuditEvent.Kind


def events(kind, **filters):
    return list(AuditEvent.objects.filter(kind=kind, **filters).order_by("id"))


def test_a_password_sign_in_and_out_are_recorded_with_the_address(client, operator):
    response = client.post("/accounts/login/", {"username": "otto", "password": "pw-otto"})
    assert response.status_code == 302
    (signed_in,) = events(Kind.SIGN_IN)
    assert (signed_in.actor, signed_in.actor_name, signed_in.via) == (operator, "otto", "password")
    assert signed_in.address == "127.0.0.1" and signed_in.subject == "otto signed in"
    client.post("/accounts/logout/")
    (signed_out,) = events(Kind.SIGN_OUT)
    assert (signed_out.actor, signed_out.via, signed_out.address) == (
        operator,
        "password",
        "127.0.0.1",
    )


def test_a_refused_sign_in_keeps_the_name_tried_never_the_password(client, operator):
    response = client.post("/accounts/login/", {"username": "otto", "password": "guess-42"})
    assert response.status_code == 200  # the form again, with its error
    (refused,) = events(Kind.SIGN_IN_REFUSED)
    assert (refused.actor, refused.actor_name, refused.via) == (None, "otto", "password")
    assert refused.address == "127.0.0.1"
    stored = AuditEvent.objects.filter(pk=refused.pk).values_list("subject", "data").get()
    assert "guess-42" not in str(stored)
    assert not events(Kind.SIGN_IN)


class ProviderBackend(OIDCAuthenticationBackend):
    """The identity provider's backend, without the provider's settings it reads."""

    def __init__(self, *args, **kwargs):
        self.UserModel = get_user_model()


def test_an_identity_provider_sign_in_is_left_to_the_provider_s_own_record(
    client, operator, settings
):
    backend = f"{__name__}.ProviderBackend"
    settings.AUTHENTICATION_BACKENDS = [*settings.AUTHENTICATION_BACKENDS, backend]
    client.force_login(operator, backend=backend)
    assert not events(Kind.SIGN_IN)  # the OIDC sign-in records its own, with via "oidc"
    client.logout()
    (signed_out,) = events(Kind.SIGN_OUT)
    assert signed_out.via == "oidc"


def test_groups_changed_from_a_command_are_recorded_as_the_command_line(django_user_model):
    user = make_user(django_user_model, "rita")
    operator = Group.objects.get(name="operator")
    user.groups.add(operator)
    operator.user_set.remove(user)  # the other side of the relation
    user.groups.add(*Group.objects.filter(name__in=["viewer", "editor"]))
    user.groups.clear()
    changes = [(e.subject, e.data["before"], e.data["after"]) for e in events(Kind.ROLE_CHANGED)]
    assert changes == [
        ("rita: now operator", [], ["operator"]),
        ("rita: no longer operator", ["operator"], []),
        ("rita: now editor, now viewer", [], ["editor", "viewer"]),
        ("rita: no longer editor, no longer viewer", ["editor", "viewer"], []),
    ]
    who = {(e.actor, e.actor_name, e.via) for e in events(Kind.ROLE_CHANGED)}
    assert who == {(None, command_line(), "command line")}


def test_the_admin_changing_a_user_s_roles_is_recorded_as_the_administrator(
    client, admin_user, django_user_model
):
    user = make_user(django_user_model, "rita", "viewer")
    AuditEvent.objects.all().delete()
    client.force_login(admin_user)
    form = {
        "username": "rita",
        "is_active": "on",
        "is_superuser": "on",
        "groups": [Group.objects.get(name="operator").pk],
        "date_joined_0": "2026-01-01",
        "date_joined_1": "00:00:00",
        "_save": "Save",
    }
    response = client.post(f"/admin/auth/user/{user.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    found = {e.subject: e for e in events(Kind.ROLE_CHANGED)}
    assert set(found) == {
        "rita: now administrator",
        "rita: no longer viewer",
        "rita: now operator",
    }
    for event in found.values():
        assert (event.actor, event.via, event.address) == (admin_user, "admin", "127.0.0.1")
        assert event.data["user"] == "rita"
    assert found["rita: now operator"].data["after"] == ["administrator", "operator"]


def test_a_superuser_made_and_unmade_is_a_role_change(django_user_model):
    user = make_user(django_user_model, "rita")
    user.is_superuser = True
    user.save()
    user.is_superuser = False
    user.save()
    user.last_name = "Levi"
    user.save()  # nothing of its roles
    changes = [(e.subject, e.data["before"], e.data["after"]) for e in events(Kind.ROLE_CHANGED)]
    assert changes == [
        ("rita: now administrator", [], ["administrator"]),
        ("rita: no longer administrator", ["administrator"], []),
    ]


def test_memberships_made_changed_and_ended_name_their_project(django_user_model):
    beta = Project.objects.create(name="Beta", slug="beta")
    user = make_user(django_user_model, "rita")
    membership = Membership.objects.create(project=beta, user=user, role="viewer")
    membership.role = "editor"
    membership.save()
    membership.save()  # unchanged: nothing to record
    membership.delete()
    changes = [
        (e.subject, e.project, e.data["before"], e.data["after"])
        for e in events(Kind.MEMBERSHIP_CHANGED)
    ]
    assert changes == [
        ("rita: viewer in Beta", beta, None, "viewer"),
        ("rita: viewer → editor in Beta", beta, "viewer", "editor"),
        ("rita: no longer editor in Beta", beta, "editor", None),
    ]


def test_a_project_deleted_with_its_members_keeps_their_events(django_user_model):
    gamma = Project.objects.create(name="Gamma", slug="gamma")
    Membership.objects.create(
        project=gamma, user=make_user(django_user_model, "rita"), role="viewer"
    )
    gamma.delete()
    ended = events(Kind.MEMBERSHIP_CHANGED)[-1]
    assert ended.subject == "rita: no longer viewer in Gamma"
    assert ended.project is None and ended.data["project_slug"] == "gamma"


def test_a_token_issued_and_revoked_names_its_prefix_and_projects_never_its_secret(
    operator,
):
    beta = Project.objects.create(name="Beta", slug="beta")
    token, secret = ApiToken.issue(operator, name="ci")
    token.projects.set([beta])
    (created,) = events(Kind.TOKEN_CREATED)
    assert created.data["token"] == token.prefix and created.data["name"] == "ci"
    assert created.data["projects"] == ["beta"] and created.data["owner"] == "otto"
    assert created.subject == f"token {token.prefix}… (ci) of otto created"
    assert token.revoke() and not token.revoke()  # the second changes nothing
    (revoked,) = events(Kind.TOKEN_REVOKED)
    assert revoked.data["projects"] == ["beta"]
    stored = list(AuditEvent.objects.values_list("subject", "data", "actor_name"))
    assert secret not in str(stored) and secret[8:20] not in str(stored)


def test_tokens_revoked_in_the_admin_are_each_recorded_as_the_administrator(
    client, admin_user, operator
):
    tokens = [ApiToken.issue(operator, name=f"t{n}")[0] for n in range(2)]
    client.force_login(admin_user)
    response = client.post(
        "/admin/console/apitoken/",
        {"action": "revoke_tokens", "_selected_action": [t.pk for t in tokens]},
    )
    assert response.status_code == 302
    revoked = events(Kind.TOKEN_REVOKED)
    assert sorted(e.data["token"] for e in revoked) == sorted(t.prefix for t in tokens)
    assert {(e.actor, e.via, e.address) for e in revoked} == {(admin_user, "admin", "127.0.0.1")}


def test_a_recipe_saved_in_the_admin_is_an_edit_by_its_author(client, admin_user, make_recipe):
    recipe = make_recipe("name: t\nnodes:\n  - id: a\n    bash: echo one\n", slug="edited")
    client.force_login(admin_user)
    form = {
        "enabled": "on",
        "source": "name: t\nnodes:\n  - id: a\n    bash: echo two\n",
        "note": "say two",
        "project": recipe.project_id,
        "_save": "Save",
    }
    response = client.post(f"/admin/recipes/recipe/{recipe.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    first, edit = events(Kind.RECIPE_EDITED)
    assert (first.subject, first.data["version"], first.data["note"]) == ("edited v1", 1, "created")
    assert (edit.subject, edit.actor, edit.via, edit.address) == (
        "edited v2",
        admin_user,
        "admin",
        "127.0.0.1",
    )
    assert edit.project == recipe.project == Project.default()
    assert edit.data == {"recipe": "edited", "version": 2, "note": "say two"}


@pytest.mark.django_db(transaction=True)
def test_a_management_command_is_recorded_as_its_command_line(operator):
    token, _ = ApiToken.issue(operator, name="ci")
    done = subprocess.run(
        [sys.executable, "manage.py", "api_token", "revoke", str(token.pk)],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": _database_url()},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    (revoked,) = events(Kind.TOKEN_REVOKED)
    assert (revoked.actor, revoked.via) == (None, "command line")
    assert revoked.actor_name == f"manage.py api_token revoke {token.pk}"
    call_command("api_token", "list")  # reading records nothing
    assert AuditEvent.objects.count() == 3  # the token made, the user's role, its revocation
