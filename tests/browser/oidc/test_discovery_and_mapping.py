"""Without a browser: the login page with and without OIDC, a provider that cannot be
reached or is not the issuer named, the settings that cannot work, and the claim mapping's
rules (the strongest role of a project, administrators only globally, where the claim is)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import AnonymousUser
from django.test import RequestFactory

from console import oidc
from console.models import OidcRoleMapping, Project
from tests.conftest import ROOT, _free_port


@pytest.fixture
def oidc_on(settings):
    """OIDC on in this process, against `settings.LOOP_OIDC_ISSUER` as the test sets it."""
    settings.OIDC_ENABLED = True
    settings.LOOP_OIDC_NAME = "Acme SSO"
    settings.OIDC_RP_CLIENT_ID = "loop-console"
    settings.OIDC_TIMEOUT = 5
    oidc._discovered.clear()
    yield settings
    oidc._discovered.clear()


def test_the_login_page_is_unchanged_while_oidc_is_off(client, db):
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with" not in page and 'name="password"' in page


def test_the_login_page_offers_the_provider_beside_passwords(client, db, oidc_on):
    oidc_on.LOOP_OIDC_ISSUER = "http://127.0.0.1:9"
    page = client.get("/accounts/login/?next=/runs/").content.decode()
    assert 'href="/oidc/authenticate/?next=/runs/"' in page
    assert "Sign in with Acme SSO" in page and 'name="password"' in page


def test_a_provider_that_cannot_be_reached_is_named_on_the_login_page(client, db, oidc_on):
    oidc_on.LOOP_OIDC_ISSUER = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    answer = client.get("/oidc/authenticate/")
    assert answer.status_code == 502
    page = answer.content.decode()
    assert "Acme SSO cannot be reached" in page and "or sign in with your password" in page
    assert oidc_on.LOOP_OIDC_ISSUER + "/.well-known/openid-configuration" in page
    assert not oidc._discovered  # the next sign-in asks again


def test_a_provider_that_is_not_the_issuer_named_is_refused(client, db, oidc_on, oidc_provider):
    # The same provider under another name: its discovery document names 127.0.0.1.
    oidc_on.LOOP_OIDC_ISSUER = oidc_provider.issuer.replace("127.0.0.1", "localhost")
    page = client.get("/oidc/authenticate/").content.decode()
    assert f"names the issuer &#x27;{oidc_provider.issuer}&#x27;" in page


def test_a_session_signed_in_with_a_password_logs_out_here_only(db, oidc_on, oidc_provider):
    oidc_on.LOOP_OIDC_ISSUER = oidc_provider.issuer
    request = RequestFactory().post("/accounts/logout/")
    request.session = {}
    assert oidc.provider_logout_url(request) == "/accounts/login/"
    request.session = {"oidc_id_token": "header.payload.signature"}
    url = oidc.provider_logout_url(request)
    assert url.startswith(oidc_provider.issuer + "/session/end?id_token_hint=header.payload")
    assert "post_logout_redirect_uri=http%3A%2F%2Ftestserver%2Faccounts%2Flogin%2F" in url


def test_a_password_sent_while_passwords_are_off_is_refused(client, db, settings):
    settings.LOOP_PASSWORD_LOGIN = False
    settings.OIDC_ENABLED = True
    answer = client.post("/accounts/login/", {"username": "x", "password": "y"})
    assert answer.status_code == 403 and 'name="password"' not in answer.content.decode()
    assert isinstance(answer.wsgi_request.user, AnonymousUser)


@pytest.mark.parametrize(
    "environment, problem",
    [
        ({"LOOP_PASSWORD_LOGIN": "0"}, "nobody could sign in"),
        ({"LOOP_OIDC_ISSUER": "https://sso.example"}, "LOOP_OIDC_CLIENT_ID"),
        (
            {
                "LOOP_OIDC_ISSUER": "https://sso.example",
                "LOOP_OIDC_CLIENT_ID": "c",
                "LOOP_OIDC_CLIENT_SECRET": "s",
                "LOOP_OIDC_SCOPES": "email profile",
            },
            "must include openid",
        ),
    ],
)
def test_settings_that_cannot_work_stop_the_start(environment, problem):
    names = ("LOOP_OIDC_", "LOOP_PASSWORD_LOGIN")
    env = {k: v for k, v in os.environ.items() if not k.startswith(names)}
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "console.settings", **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and problem in done.stderr, done.stderr[-2000:]


def test_the_strongest_role_in_a_project_holds_and_administrators_are_global(db):
    alpha = Project.objects.create(name="Alpha", slug="alpha")
    for value, role, project in [
        ("readers", "viewer", alpha),
        ("builders", "editor", alpha),
        ("ops", "operator", alpha),
        ("alpha-admins", OidcRoleMapping.ADMINISTRATOR, alpha),  # not a project's role
        ("everyone", "viewer", None),
    ]:
        OidcRoleMapping.objects.create(claim_value=value, role=role, project=project)
    grants = oidc.grants_for(["readers", "builders", "ops", "alpha-admins", "everyone", "x"])
    assert grants.project_roles == {alpha.pk: "editor"}
    assert grants.global_roles == {"viewer"} and not grants.administrator
    assert oidc.grants_for([]) == oidc.Grants()


def test_the_groups_claim_may_be_one_string_or_a_path(settings):
    assert oidc.claim_values({"groups": ["a", "b"]}) == ["a", "b"]
    assert oidc.claim_values({"groups": "a"}) == ["a"]
    assert oidc.claim_values({}) == []
    settings.LOOP_OIDC_GROUPS_CLAIM = "realm_access.roles"
    assert oidc.claim_values({"realm_access": {"roles": ["ops"]}}) == ["ops"]
    settings.LOOP_OIDC_GROUPS_CLAIM = "https://example.com/roles"  # a namespaced claim
    assert oidc.claim_values({"https://example.com/roles": ["ops"]}) == ["ops"]
    settings.LOOP_OIDC_GROUPS_CLAIM = "hd, email"  # Google: the domain and the person
    assert oidc.claim_values({"hd": "example.com", "email": "a@example.com"}) == [
        "example.com",
        "a@example.com",
    ]


def test_the_account_is_named_by_preferred_username_else_a_verified_email():
    assert oidc.account_name({"preferred_username": "ana", "email": "a@x"}) == "ana"
    assert oidc.account_name({"email": "a@x"}) == "a@x"
    assert oidc.account_name({"email": "a@x", "email_verified": False}) == ""
