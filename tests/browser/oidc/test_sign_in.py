"""Sign-in through a real OpenID provider (tests/browser/oidc/provider.mjs, the `oidc-provider`
package) in Chromium: each person lands with the roles the claim mapping gives, a changed
group takes effect at the next sign-in, logout ends the session here and at the provider,
an answer with a tampered state or nonce is refused, an account with a password is not
taken over, and LOOP_PASSWORD_LOGIN=0 leaves the provider as the only way in."""

from __future__ import annotations

import re
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest
from django.contrib.auth import get_user_model
from playwright.sync_api import expect

from console.models import AuditEvent, Membership, OidcRoleMapping, Project
from runs.models import Run
from tests.browser.oidc.conftest import PROVIDER_NAME
from tests.conftest import make_user

pytestmark = pytest.mark.browser

SOURCE = "name: {name}\nnodes:\n  - id: a\n    bash: echo hi\n"


def people(**groups: list[str]) -> dict:
    return {
        name: {"password": "pw-" + name, "email": f"{name}@example.com", "groups": given}
        for name, given in groups.items()
    }


@pytest.fixture
def projects(transactional_db, make_recipe):
    """Projects Alpha and Beta, a finished run in each, and the mapping of the provider's
    groups: alpha-operators operate in Alpha, beta-viewers view Beta."""
    runs = {}
    for slug in ("alpha", "beta"):
        project = Project.objects.create(name=slug.title(), slug=slug)
        recipe = make_recipe(SOURCE.format(name=f"{slug} flow"), slug=f"{slug}-flow")
        recipe.project = project
        recipe.save()
        runs[slug] = Run.objects.create(
            recipe=recipe, recipe_version=recipe.versions.first(), message=slug, status="completed"
        )
    alpha, beta = Project.objects.get(slug="alpha"), Project.objects.get(slug="beta")
    OidcRoleMapping.objects.create(claim_value="alpha-operators", role="operator", project=alpha)
    OidcRoleMapping.objects.create(claim_value="beta-viewers", role="viewer", project=beta)
    OidcRoleMapping.objects.create(claim_value="console-admins", role="administrator")
    return runs


@contextmanager
def browser(chromium):
    """A browser of its own: no cookie of the console's or the provider's from before."""
    context = chromium.new_context()
    context.set_default_timeout(60_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def fill_provider_form(page, provider, username: str, password: str = "") -> None:
    page.wait_for_url(provider.issuer + "/interaction/**")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password or "pw-" + username)
    page.click("button:has-text('Sign in')")


def sign_in(page, console: str, provider, username: str) -> None:
    """From a page that needs a session, through the provider's login form, back to it."""
    page.goto(console + "/")
    page.wait_for_url(re.compile(re.escape(console) + "/accounts/login/"))
    page.click("#sign-in-with-provider")
    fill_provider_form(page, provider, username)
    page.wait_for_url(console + "/")


def fresh(username: str):
    return get_user_model().objects.get(username=username)


def roles_of(username: str) -> dict[str, str]:
    return dict(
        Membership.objects.filter(user__username=username).values_list("project__slug", "role")
    )


def visible(username: str, perm: str = "runs.view_run") -> set[str]:
    return {run.project.slug for run in Run.objects.visible_to(fresh(username), perm)}


def test_each_person_lands_with_the_roles_the_mapping_gives(
    oidc_provider, oidc_console, projects, chromium
):
    oidc_provider.set_people(people(alice=["alpha-operators"], bob=["beta-viewers"]))
    for name in ("alice", "bob"):
        with browser(chromium) as page:
            sign_in(page, oidc_console, oidc_provider, name)
            expect(page.locator(".topbar .logout")).to_contain_text(name)
            expect(page.locator("main")).not_to_contain_text("You do not have access")

    alice = fresh("alice")
    assert alice.email == "alice@example.com" and not alice.has_usable_password()
    assert roles_of("alice") == {"alpha": "operator"} and roles_of("bob") == {"beta": "viewer"}
    assert not alice.groups.exists() and not alice.is_superuser
    assert visible("alice") == {"alpha"} and visible("alice", "runs.operate_run") == {"alpha"}
    assert visible("bob") == {"beta"} and visible("bob", "runs.operate_run") == set()
    signed_in = AuditEvent.objects.filter(kind="sign_in", via="oidc")
    assert sorted(signed_in.values_list("actor__username", flat=True)) == ["alice", "bob"]
    assert all(event.address == "127.0.0.1" for event in signed_in)
    granted = AuditEvent.objects.get(kind="membership_changed", data__user="alice")
    assert (granted.project.slug, granted.data["before"], granted.data["after"]) == (
        "alpha",
        None,
        "operator",
    )
    assert (granted.actor_name, granted.via) == ("claim mapping", "oidc")


def test_a_changed_group_takes_effect_at_the_next_sign_in(
    oidc_provider, oidc_console, projects, chromium
):
    """Each sign-in replaces what the last one gave; the mapping giving nothing leaves a
    signed-in person on the page that says they have no role."""
    steps = [
        (["alpha-operators"], {"alpha": "operator"}, {"alpha"}),
        (["beta-viewers"], {"beta": "viewer"}, {"beta"}),
        (["console-admins"], {}, {"alpha", "beta"}),
        ([], {}, set()),
    ]
    for groups, roles, sees in steps:
        oidc_provider.set_people(people(alice=groups))
        with browser(chromium) as page:
            sign_in(page, oidc_console, oidc_provider, "alice")
            no_role = page.locator("main h1", has_text="You do not have access to this")
            expect(no_role).to_have_count(0 if sees else 1)
            if not sees:
                expect(page.locator("main")).to_contain_text("needs the viewer role")
        assert roles_of("alice") == roles, groups
        assert visible("alice") == sees, groups
        assert fresh("alice").is_superuser == ("console-admins" in groups), groups

    changes = AuditEvent.objects.filter(data__user="alice").order_by("at", "id")
    assert {(e.actor_name, e.via) for e in changes} == {("claim mapping", "oidc")}
    memberships = [
        (e.project.slug, e.data["before"], e.data["after"])
        for e in changes.filter(kind="membership_changed")
    ]
    assert memberships == [
        ("alpha", None, "operator"),
        ("alpha", "operator", None),
        ("beta", None, "viewer"),
        ("beta", "viewer", None),
    ]
    administrator = [
        ("administrator" in e.data["before"], "administrator" in e.data["after"])
        for e in changes.filter(kind="role_changed")
    ]
    assert administrator == [(False, True), (True, False)]


def test_logout_ends_the_session_here_and_at_the_provider(
    oidc_provider, oidc_console, projects, page
):
    oidc_provider.set_people(people(alice=["alpha-operators"]))
    sign_in(page, oidc_console, oidc_provider, "alice")
    page.click(".topbar .logout button")
    # The provider's end-session page asks whether to sign out there as well.
    page.wait_for_url(oidc_provider.issuer + "/session/end**")
    page.click("button[value=yes]")
    page.wait_for_url(oidc_console + "/accounts/login/")

    page.goto(oidc_console + "/runs/")
    assert urlsplit(page.url).path == "/accounts/login/"
    # Signed out at the provider too: signing in asks for the password again.
    page.click("#sign-in-with-provider")
    page.wait_for_url(oidc_provider.issuer + "/interaction/**")
    expect(page.locator("input[name=password]")).to_be_visible()


def with_parameter(url: str, name: str, value: str) -> str:
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    assert name in query, (name, url)
    return urlunsplit(parts._replace(query=urlencode({**query, name: value})))


@pytest.mark.parametrize("parameter", ["state", "nonce"])
def test_an_answer_with_a_tampered_state_or_nonce_is_refused(
    oidc_provider, oidc_console, projects, page, parameter
):
    """The authorization request this browser's session made, sent to the provider with its
    state (which comes back in the answer) or its nonce (which comes back inside the signed
    ID token) changed: the callback no longer matches the session, and is refused."""
    oidc_provider.set_people(people(alice=["alpha-operators"]))
    page.goto(oidc_console + "/accounts/login/")
    start = page.context.request.get(oidc_console + "/oidc/authenticate/", max_redirects=0)
    assert start.status == 302
    page.goto(with_parameter(start.headers["location"], parameter, f"forged-{parameter}"))
    with page.expect_response(lambda r: "/oidc/callback/" in r.url) as answer:
        fill_provider_form(page, oidc_provider, "alice")
    assert answer.value.status == 400
    expect(page.locator("p.error")).to_contain_text(
        f"The answer from {PROVIDER_NAME} does not belong to this sign-in"
    )

    refused = AuditEvent.objects.get(kind="sign_in_refused")
    assert refused.via == "oidc" and refused.data["reason"] == "did_not_match"
    assert {"state": "state", "nonce": "Nonce"}[parameter] in refused.data["detail"]
    assert not AuditEvent.objects.filter(kind="sign_in").exists()
    assert not get_user_model().objects.filter(username="alice").exists()
    page.goto(oidc_console + "/runs/")
    assert urlsplit(page.url).path == "/accounts/login/"


def test_an_account_with_a_password_is_not_taken_over(
    oidc_provider, oidc_console, projects, page, chromium, django_user_model
):
    """A person of the provider named like a local account with a password does not become
    it (nor change its roles) until an administrator turns that password off."""
    make_user(django_user_model, "alice", "editor")
    oidc_provider.set_people(people(alice=["beta-viewers"]))
    page.goto(oidc_console + "/accounts/login/")
    page.click("#sign-in-with-provider")
    with page.expect_response(lambda r: "/oidc/callback/" in r.url) as answer:
        fill_provider_form(page, oidc_provider, "alice")
    assert answer.value.status == 403
    expect(page.locator("p.error")).to_contain_text("signs in with a password here")
    assert roles_of("alice") == {}
    assert list(fresh("alice").groups.values_list("name", flat=True)) == ["editor"]
    assert AuditEvent.objects.get(kind="sign_in_refused").data["reason"] == "account_refused"

    alice = fresh("alice")
    alice.set_unusable_password()
    alice.save()
    with browser(chromium) as page:
        sign_in(page, oidc_console, oidc_provider, "alice")
    assert roles_of("alice") == {"beta": "viewer"} and not fresh("alice").groups.exists()


def test_with_password_login_off_only_the_provider_signs_in(
    oidc_provider, oidc_only_console, projects, page, django_user_model
):
    make_user(django_user_model, "vera", "viewer")
    page.goto(oidc_only_console + "/accounts/login/")
    expect(page.locator("#sign-in-with-provider")).to_have_text(f"Sign in with {PROVIDER_NAME}")
    expect(page.locator("input[name=password]")).to_have_count(0)

    # A password sent anyway is refused.
    token = page.locator("body").get_attribute("hx-headers").split('"')[3]
    answer = page.context.request.post(
        oidc_only_console + "/accounts/login/",
        form={"username": "vera", "password": "pw-vera"},
        headers={"X-CSRFToken": token},
        max_redirects=0,
    )
    assert answer.status == 403
    assert "Passwords do not sign in to this console" in answer.text()
    page.goto(oidc_only_console + "/runs/")
    assert urlsplit(page.url).path == "/accounts/login/"

    oidc_provider.set_people(people(bob=["beta-viewers"]))
    sign_in(page, oidc_only_console, oidc_provider, "bob")
    assert roles_of("bob") == {"beta": "viewer"}
