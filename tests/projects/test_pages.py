"""Every console page enforces projects: a person with a role in project Alpha only sees
Alpha's runs, recipes, gates, iterations and loops, and everything of Beta answers as an
id that does not exist (404, the same page, nothing of Beta in it); lists, filters and
counts hold Alpha's only; buttons are offered where the person operates, and an action
where they do not is refused (404 in Beta, 403 in a project they only view).

The runs are built row by row (`quiet_start`: nothing is sent to a worker)."""

from __future__ import annotations

import re

import pytest
from asgiref.sync import async_to_sync
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from console.models import Membership, Project
from loops.driven.models import Loop
from runs.live_views import SeenRuns
from runs.models import Gate, NodeRun, Run
from tests.console.conftest import add_iteration, quiet_start

pytestmark = pytest.mark.django_db

GATED = """
name: {name}
nodes:
  - id: decide
    approval:
      message: Go on?
"""
MISSING = 987_654_321  # an id no run, gate, iteration or loop has


def build(project, make_recipe, operator, slug: str) -> dict:
    """A recipe of `project` and a run of it paused at its gate, with a loop of two
    iterations (to compare, fork and download) and a driven loop row."""
    recipe = make_recipe(GATED.format(name=f"{slug} flow"), slug=f"{slug}-flow")
    recipe.project = project
    recipe.save()
    run = quiet_start(recipe, operator, f"{slug} work")
    Run.objects.filter(pk=run.pk).update(status=Run.Status.PAUSED)
    decide = NodeRun.objects.create(run=run, node_id="decide", kind="approval", status="paused")
    gate = Gate.objects.create(
        run=run, node_run=decide, node_id="decide", kind=Gate.Kind.APPROVAL, message="Go on?"
    )
    draft = NodeRun.objects.create(
        run=run, node_id="draft", kind="loop", status="completed", max_iterations=3
    )
    first = add_iteration(run, draft, 1, output=f"{slug} first draft")
    second = add_iteration(run, draft, 2, output=f"{slug} second draft")
    loop = Loop.objects.create(run=run, agent="a", pipeline=["a"], max_iterations=1)
    run.refresh_from_db()
    return {
        "recipe": recipe,
        "run": run,
        "gate": gate,
        "node": draft,
        "first": first,
        "second": second,
        "loop": loop,
    }


@pytest.fixture
def world(make_recipe, operator):
    alpha = Project.objects.create(name="Alpha", slug="alpha")
    beta = Project.objects.create(name="Beta", slug="beta")
    return {
        "alpha": alpha,
        "beta": beta,
        "a": build(alpha, make_recipe, operator, "alpha"),
        "b": build(beta, make_recipe, operator, "beta"),
    }


def member(django_user_model, name: str, **roles: Project):
    """A user with no global role: `role=project` memberships only."""
    user = django_user_model.objects.create_user(name, password="pw")
    for role, project in roles.items():
        Membership.objects.create(project=project, user=user, role=role)
    return user


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def says_nothing_of_beta(text: str, world) -> bool:
    b = world["b"]
    return (
        b["recipe"].slug not in text
        and f"/runs/{b['run'].pk}/" not in text
        and "beta work" not in text
        and "beta first draft" not in text
        and f"/loops/{b['loop'].pk}/" not in text
        and ">Beta<" not in text
    )


def without_token(text: str) -> str:
    """A page without its CSRF token (a new one on every answer)."""
    return re.sub(r'"X-CSRFToken": "[^"]*"|name="csrfmiddlewaretoken" value="[^"]*"', "", text)


def pages_of(side: dict, missing: bool = False) -> list[tuple[str, str]]:
    """(method, path) of every page of one project's objects (of ids no object has when
    `missing`), to read."""
    run, gate, node = side["run"].pk, side["gate"].pk, side["node"].pk
    it, loop, slug = side["second"].pk, side["loop"].pk, side["recipe"].slug
    if missing:
        run = gate = node = it = loop = MISSING
        slug = "no-such-recipe"
    return [
        ("get", f"/runs/{run}/"),
        ("get", f"/runs/{run}/part/header/"),
        ("get", f"/runs/{run}/part/nodes/"),
        ("get", f"/runs/{run}/part/gate/"),
        ("get", f"/runs/{run}/iterations/"),
        ("get", f"/runs/{run}/events/"),
        ("get", f"/runs/{run}/gates/{gate}/"),
        ("get", f"/runs/{run}/iterations/{it}/output/"),
        ("get", f"/runs/{run}/nodes/{node}/output/"),
        ("get", f"/runs/{run}/loops/"),
        ("get", f"/runs/{run}/live/"),
        ("get", f"/runs/{run}/review/"),
        ("get", f"/runs/compare/?a={it}"),
        ("get", f"/loops/{loop}/"),
        ("get", f"/recipes/{slug}/"),
        ("get", f"/recipes/{slug}/diff/?a=1&b=1"),
    ]


def actions_of(side: dict, missing: bool = False) -> list[tuple[str, str, dict]]:
    """(method, path, form) of every action on one project's objects."""
    run, gate, slug = side["run"].pk, side["gate"].pk, side["recipe"].slug
    if missing:
        run = gate = MISSING
        slug = "no-such-recipe"
    fork = {"node": "draft", "iteration": "1"}
    return [
        ("post", f"/runs/{run}/cancel/", {}),
        ("post", f"/runs/{run}/resume/", {}),
        ("post", f"/runs/{run}/rerun/", {}),
        ("post", f"/runs/{run}/budget/", {"max_iterations": "5"}),
        ("get", f"/runs/{run}/fork/?node=draft&iteration=1", {}),
        ("post", f"/runs/{run}/fork/", fork),
        ("post", f"/runs/{run}/gates/{gate}/approve/", {"comment": ""}),
        ("post", f"/runs/{run}/gates/{gate}/reject/", {"reason": "no"}),
        ("post", f"/runs/{run}/gates/{gate}/respond/", {"decision": "approve"}),
        ("post", f"/runs/{run}/tick/", {}),
        ("post", f"/runs/{run}/review/merge/", {}),
        ("get", f"/recipes/{slug}/start/", {}),
        ("post", f"/recipes/{slug}/start/", {"message": "x"}),
        ("post", f"/recipes/{slug}/demo-repository/", {}),
    ]


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_every_page_of_the_other_project_answers_as_one_that_does_not_exist(
    role, world, django_user_model
):
    client = browser(member(django_user_model, "amy", **{role: world["alpha"]}))
    for (method, path), (_, missing) in zip(
        pages_of(world["b"]), pages_of(world["b"], True), strict=True
    ):
        answer = getattr(client, method)(path)
        assert answer.status_code == 404, path
        nothing = getattr(client, method)(missing)
        assert nothing.status_code == 404, missing
        if not answer.streaming:
            body = answer.content.decode()
            assert says_nothing_of_beta(body, world), path
            assert without_token(body) == without_token(nothing.content.decode()), path


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_the_pages_of_the_own_project_are_there(role, world, django_user_model):
    client = browser(member(django_user_model, "amy", **{role: world["alpha"]}))
    a = world["a"]
    for method, path in pages_of(a):
        if path.endswith(("/live/", "/review/")):
            continue  # a stream; a review page only a step machine's run has
        answer = getattr(client, method)(path)
        assert answer.status_code in (200, 302), path
        if not answer.streaming:
            assert says_nothing_of_beta(answer.content.decode(), world), path
    page = client.get(f"/runs/{a['run'].pk}/").content.decode()
    assert "<dt>Project</dt><dd>Alpha</dd>" in page
    recipe = client.get(f"/recipes/{a['recipe'].slug}/").content.decode()
    assert '<span class="recipe-project">Alpha</span>' in recipe


def test_comparing_with_an_iteration_of_the_other_project_is_404(world, django_user_model):
    client = browser(member(django_user_model, "amy", viewer=world["alpha"]))
    a, b = world["a"], world["b"]
    assert client.get(f"/runs/compare/?a={a['first'].pk}&b={b['second'].pk}").status_code == 404
    # Another project's run as the other side: the picker stays on the own run.
    page = client.get(f"/runs/compare/?a={a['first'].pk}&b_run={b['run'].pk}", follow=True)
    assert page.status_code == 200 and says_nothing_of_beta(page.content.decode(), world)


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_lists_filters_and_counts_hold_the_own_project_only(role, world, django_user_model):
    client = browser(member(django_user_model, "amy", **{role: world["alpha"]}))
    a, b = world["a"], world["b"]
    for path in (
        "/",
        "/?part=live",
        "/runs/",
        "/runs/?status=paused",
        "/runs/?q=work",
        f"/runs/?recipe={a['recipe'].slug}",
        "/runs/?project=alpha",
        "/recipes/",
        "/loops/",
        f"/loops/?session={b['run'].pk}",
    ):
        answer = client.get(path)
        assert answer.status_code == 200, path
        assert says_nothing_of_beta(answer.content.decode(), world), path
    assert f"/runs/{a['run'].pk}/" in client.get("/runs/").content.decode()
    assert f"/runs/{a['run'].pk}/" in client.get("/").content.decode()
    assert f"/loops/{a['loop'].pk}/" in client.get("/loops/").content.decode()
    inbox = client.get("/").context
    assert inbox["runs_total"] == "1" and inbox["status_counts"] == [("paused", "1")]
    assert [item.run.pk for item in inbox["ranked"]] == [a["run"].pk]
    # Another project's recipe or project in a filter reads as one that does not exist.
    for name, value in (("recipe", b["recipe"].slug), ("project", "beta")):
        hidden = client.get(f"/runs/?{name}={value}").content.decode()
        missing = client.get(f"/runs/?{name}=nothing-{value}").content.decode()
        assert f"There is no {name} “{value}”." in hidden and "No runs match." in hidden
        assert without_token(hidden).replace(value, "nothing-" + value) == without_token(missing)


def test_an_operator_of_one_project_acts_there_and_not_in_the_other(world, django_user_model):
    client = browser(member(django_user_model, "amy", operator=world["alpha"]))
    for method, path, form in actions_of(world["b"]):
        answer = getattr(client, method)(path, form)
        assert answer.status_code == 404, path
        assert says_nothing_of_beta(answer.content.decode(), world), path
    a, b = world["a"], world["b"]
    decided = client.post(
        f"/runs/{a['run'].pk}/gates/{a['gate'].pk}/respond/", {"decision": "approve"}
    )
    assert decided.status_code == 302
    a["gate"].refresh_from_db()
    assert not a["gate"].is_pending
    b["gate"].refresh_from_db()
    assert b["gate"].is_pending
    assert client.get(f"/recipes/{a['recipe'].slug}/start/").status_code == 200
    assert client.get(f"/runs/{a['run'].pk}/fork/?node=draft&iteration=1").status_code == 200


def test_a_viewer_of_a_project_cannot_act_there(world, django_user_model):
    client = browser(member(django_user_model, "amy", viewer=world["alpha"]))
    for (method, path, form), (_, missing, _) in zip(
        actions_of(world["a"]), actions_of(world["a"], True), strict=True
    ):
        assert getattr(client, method)(path, form).status_code == 403, path
        # An id no object has is no different from another project's: 404, never 403.
        assert getattr(client, method)(missing, form).status_code == 404, missing
    for method, path, form in actions_of(world["b"]):
        assert getattr(client, method)(path, form).status_code == 404, path
    world["a"]["gate"].refresh_from_db()
    assert world["a"]["gate"].is_pending


def test_buttons_are_offered_where_the_person_operates(world, django_user_model):
    """Viewer in Alpha, operator in Beta: Beta's runs and recipes have their buttons,
    Alpha's none."""
    user = member(django_user_model, "amy", viewer=world["alpha"], operator=world["beta"])
    client = browser(user)
    a, b = world["a"], world["b"]
    for side, offered in ((a, False), (b, True)):
        run = side["run"].pk
        page = client.get(f"/runs/{run}/").content.decode()
        assert (f"/runs/{run}/cancel/" in page) is offered
        assert (f"/runs/{run}/gates/{side['gate'].pk}/approve/" in page) is offered
        header = client.get(f"/runs/{run}/part/header/").content.decode()
        assert (f"/runs/{run}/rerun/" in header) is offered
        recipe = client.get(f"/recipes/{side['recipe'].slug}/").content.decode()
        assert (f"/recipes/{side['recipe'].slug}/start/" in recipe) is offered
    recipes = client.get("/recipes/").content.decode()
    assert f"/recipes/{b['recipe'].slug}/start/" in recipes
    assert f"/recipes/{a['recipe'].slug}/start/" not in recipes
    inbox = client.get("/").content.decode()
    assert f"/runs/{b['run'].pk}/gates/{b['gate'].pk}/approve/" in inbox
    assert f"/runs/{a['run'].pk}/gates/{a['gate'].pk}/approve/" not in inbox
    # Both projects: the list says which one each run is of, and filters by it.
    listed = client.get("/runs/").content.decode()
    assert "<td>Alpha</td>" in listed and "<td>Beta</td>" in listed
    only_beta = client.get("/runs/?project=beta").content.decode()
    assert f"/runs/{b['run'].pk}/" in only_beta and f"/runs/{a['run'].pk}/" not in only_beta


def test_global_roles_see_every_project(world, viewer, operator):
    client = browser(viewer)
    for side in ("a", "b"):
        for method, path in pages_of(world[side]):
            if path.endswith(("/live/", "/review/")):
                continue
            assert getattr(client, method)(path).status_code in (200, 302), path
    listed = client.get("/runs/").content.decode()
    assert all(f"/runs/{world[s]['run'].pk}/" in listed for s in ("a", "b"))
    assert client.get("/").context["runs_total"] == "2"
    page = browser(operator).get(f"/runs/{world['b']['run'].pk}/").content.decode()
    assert f"/runs/{world['b']['run'].pk}/cancel/" in page


def test_a_run_of_another_project_goes_unnamed_on_a_run_page(world, django_user_model):
    """A re-run's or a child's link to a run of another project is left out."""
    a, b = world["a"], world["b"]
    Run.objects.filter(pk=a["run"].pk).update(rerun_of=b["run"], parent=b["run"])
    client = browser(member(django_user_model, "amy", viewer=world["alpha"]))
    page = client.get(f"/runs/{a['run'].pk}/").content.decode()
    assert says_nothing_of_beta(page, world) and "Re-run of" not in page
    Run.objects.filter(pk=a["run"].pk).update(rerun_of=None, parent=None)
    Run.objects.filter(pk=b["run"].pk).update(forked_from=a["run"])
    page = client.get(f"/runs/{a['run'].pk}/").content.decode()
    assert says_nothing_of_beta(page, world) and "Forks" not in page


def test_the_inbox_stream_tells_of_the_own_project_only(world, django_user_model):
    user = member(django_user_model, "amy", viewer=world["alpha"])
    seen = SeenRuns(user)
    a, b = world["a"]["run"].pk, world["b"]["run"].pk
    assert not async_to_sync(seen.any_of)([{"type": "event", "run": b}])
    assert async_to_sync(seen.any_of)([{"type": "event", "run": b}, {"type": "event", "run": a}])
    assert seen.known == {a: True, b: False}


def test_a_page_costs_the_same_queries_however_many_projects(
    world, django_user_model, make_recipe, operator
):
    user = member(django_user_model, "amy", viewer=world["alpha"])
    client = browser(user)
    paths = ["/", "/runs/", "/recipes/", "/loops/", f"/runs/{world['a']['run'].pk}/"]

    def costs() -> list[int]:
        counts = []
        for path in paths:
            client.get(path)
            with CaptureQueriesContext(connection) as seen:
                assert client.get(path).status_code == 200
            counts.append(len(seen.captured_queries))
        return counts

    before = costs()
    for n in range(4):
        project = Project.objects.create(name=f"P{n}", slug=f"p{n}")
        Membership.objects.create(project=project, user=user, role="viewer")
        build(project, make_recipe, operator, f"p{n}")
    assert costs() == before
