"""The projects matrix: two projects, a user of each role in project Alpha only, every
surface. Each allowed action works; everything of project Beta answers as a run that does
not exist (404, and nothing of Beta in the answer); the inbox, the lists and the counts
show only Alpha. Runs go through a real worker (their approval gates open for real); MCP
is the console's own /mcp over HTTP."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from console.models import ApiToken, Membership, Project
from notifications import links
from notifications.models import Subscription
from runs import services
from runs.actor import ENGINE
from tests.api.conftest import ApiClient
from tests.conftest import pending_gate, wait_for
from tests.orchestration.conftest import McpHttp

pytestmark = pytest.mark.usefixtures("live_worker")

GATED = """
name: {name}
nodes:
  - id: decide
    approval:
      message: Go on?
"""
ROLES = ("viewer", "operator", "editor", "recipe author with shell")
OPERATES = {"operator", "editor", "recipe author with shell"}


@pytest.fixture
def world(make_recipe):
    """Alpha and Beta, a recipe and a run waiting at its gate in each."""
    alpha = Project.objects.create(name="Alpha", slug="alpha")
    beta = Project.objects.create(name="Beta", slug="beta")
    made = {"alpha": alpha, "beta": beta}
    for project in (alpha, beta):
        recipe = make_recipe(GATED.format(name=f"{project.slug} gate"), slug=f"{project.slug}-gate")
        recipe.project = project
        recipe.save()
        run = services.start_run(recipe, ENGINE, message=f"{project.slug} work")
        gate = wait_for(lambda run=run: pending_gate(run), message=f"{project.slug}'s gate")
        made[project.slug + "_recipe"], made[project.slug + "_run"] = recipe, run
        made[project.slug + "_gate"] = gate
    return made


def member(django_user_model, role: str, project: Project):
    user = django_user_model.objects.create_user(
        f"m-{role.split()[0]}", email=f"{role.split()[0]}@example.com", password="pw"
    )
    Membership.objects.create(project=project, user=user, role=role)
    return user


def api_for(user) -> ApiClient:
    return ApiClient(ApiToken.issue(user, name="matrix")[1])


def says_nothing_of_beta(text: str, world) -> bool:
    return (
        world["beta_recipe"].slug not in text
        and f"/runs/{world['beta_run'].pk}/" not in text
        and "beta work" not in text
    )


@pytest.mark.parametrize("role", ROLES)
def test_pages(role, world, django_user_model):
    user = member(django_user_model, role, world["alpha"])
    browser = Client()
    browser.force_login(user)
    a, b = world["alpha_run"].pk, world["beta_run"].pk
    ga, gb = world["alpha_gate"].pk, world["beta_gate"].pk
    for path in (
        f"/runs/{a}/",
        f"/runs/{a}/gates/{ga}/",
        f"/recipes/{world['alpha_recipe'].slug}/",
    ):
        assert browser.get(path).status_code == 200, path
    for path in (
        f"/runs/{b}/",
        f"/runs/{b}/gates/{gb}/",
        f"/runs/{b}/events/",
        f"/runs/{b}/iterations/",
        f"/runs/{b}/live/",
        f"/recipes/{world['beta_recipe'].slug}/",
        f"/recipes/{world['beta_recipe'].slug}/start/",
    ):
        assert browser.get(path).status_code == 404, path
    for path in ("/", "/runs/", "/recipes/", "/runs/?status=paused"):
        page = browser.get(path).content.decode()
        assert says_nothing_of_beta(page, world), path
    assert f"/runs/{a}/" in browser.get("/runs/").content.decode()
    refused = browser.post(f"/runs/{b}/cancel/")
    assert refused.status_code == 404
    mine = browser.post(f"/runs/{a}/gates/{ga}/respond/", {"decision": "approve"})
    assert mine.status_code == (302 if role in OPERATES else 403)


@pytest.mark.parametrize("role", ROLES)
def test_api_and_cli(role, world, django_user_model):
    user = member(django_user_model, role, world["alpha"])
    api = api_for(user)
    a, b = world["alpha_run"].pk, world["beta_run"].pk
    assert api.get(f"/api/runs/{a}").status_code == 200
    for path in (f"/api/runs/{b}", f"/api/runs/{b}/events", f"/api/runs/{b}/ag-ui"):
        answer = api.get(path)
        assert answer.status_code == 404, path
    listed = api.get("/api/runs").body
    assert {r["id"] for r in listed["items"]} == {a}
    inbox = api.get("/api/inbox").body["items"]
    assert {item["run"] for item in inbox} == {a}
    recipes = {r["slug"] for r in api.get("/api/recipes").body}
    assert world["beta_recipe"].slug not in recipes and world["alpha_recipe"].slug in recipes
    assert api.post(f"/api/runs/{b}/respond", {"decision": "approve"}).status_code == 404
    started = api.post("/api/runs", {"recipe": world["beta_recipe"].slug, "message": "x"})
    assert started.status_code == 404
    decided = api.post(f"/api/runs/{a}/respond", {"decision": "approve"})
    assert decided.status_code == (200 if role in OPERATES else 403)
    with pytest.raises(CommandError, match=f"No run {b}"):
        call_command("run", "status", str(b), "--user", user.username, stdout=io.StringIO())


@pytest.mark.parametrize("role", ("viewer", "operator"))
def test_mcp(role, world, django_user_model, console_server):
    user = member(django_user_model, role, world["alpha"])
    mcp = McpHttp(console_server, ApiToken.issue(user, name="mcp", scope="operate")[1])
    a, b = world["alpha_run"].pk, world["beta_run"].pk
    assert not mcp.call("get_run", run_id=a).is_error
    hidden = mcp.call("get_run", run_id=b)
    assert hidden.is_error and f"No run {b}" in hidden.content[0].text
    listed = mcp.call("list_runs").structured_content["runs"]
    assert {r["id"] for r in listed} == {a}
    answer = mcp.call("respond", run_id=b, decision="approve")
    assert answer.is_error and f"No run {b}" in answer.content[0].text


@pytest.mark.parametrize("role", ROLES)
def test_notifications_and_decision_links(role, world, django_user_model):
    user = member(django_user_model, role, world["alpha"])
    Subscription.objects.create(name="mine", channel="email", user=user)
    assert not Subscription.listening("gate_waiting", world["beta_run"]).filter(user=user)
    assert Subscription.listening("gate_waiting", world["alpha_run"]).filter(user=user)
    assert links.links_for(world["beta_gate"], user) == []
    assert bool(links.links_for(world["alpha_gate"], user)) == (role in OPERATES)


def test_a_token_limited_to_a_project_sees_only_it(world, admin_user):
    _token, secret = ApiToken.issue(admin_user, name="alpha only")
    _token.projects.set([world["alpha"]])
    api = ApiClient(secret)
    a, b = world["alpha_run"].pk, world["beta_run"].pk
    assert api.get(f"/api/runs/{a}").status_code == 200
    assert api.get(f"/api/runs/{b}").status_code == 404
    assert {r["id"] for r in api.get("/api/runs").body["items"]} == {a}


def test_the_admin_shows_a_project_staff_member_only_their_project(world, django_user_model):
    user = member(django_user_model, "editor", world["alpha"])
    user.is_staff = True
    user.save()
    browser = Client()
    browser.force_login(user)
    b = world["beta_run"].pk
    listed = browser.get("/admin/runs/run/").content.decode()
    assert f"/admin/runs/run/{world['alpha_run'].pk}/change/" in listed
    assert f"/admin/runs/run/{b}/change/" not in listed
    assert browser.get(f"/admin/runs/run/{b}/change/").status_code in (302, 404)
