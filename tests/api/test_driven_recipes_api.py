"""Driven recipes through the API and the admin, as workflow recipes are: validated with
lines, created with a first version, their kind shown."""

import pytest
from django.urls import reverse

from recipes.models import Recipe
from tests.driven.conftest import driven_recipe

pytestmark = pytest.mark.django_db

GOOD = driven_recipe("demo")
BROKEN = GOOD.replace("pool: [researcher, drafter]", "pool: [researcher, ghost]")


def test_validate_and_create_a_driven_recipe(as_editor, as_viewer):
    checked = as_viewer.post("/api/recipes/validate", {"source": BROKEN}).body
    assert checked["valid"] is False and checked["kind"] == "driven"
    (problem,) = checked["errors"]
    assert problem["path"] == "agents.host.loop.pool[1]" and problem["line"] == 11
    assert "'ghost' is not a declared agent" in problem["message"]

    refused = as_editor.post("/api/recipes", {"source": BROKEN})
    assert refused.status_code == 422 and refused.body["errors"][0]["line"] == 11
    created = as_editor.post("/api/recipes", {"source": GOOD, "slug": "drive"})
    assert created.status_code == 201 and created.body["kind"] == "driven"
    assert Recipe.objects.get(slug="drive").kind == "driven"


def test_the_admin_adds_and_refuses_driven_recipes_with_the_line(admin_user, client):
    client.force_login(admin_user)
    refused = client.post(
        reverse("admin:recipes_recipe_add"), {"slug": "drive", "enabled": "on", "source": BROKEN}
    )
    assert refused.status_code == 200 and "line 11" in refused.content.decode()
    added = client.post(
        reverse("admin:recipes_recipe_add"), {"slug": "drive", "enabled": "on", "source": GOOD}
    )
    assert added.status_code == 302
    recipe = Recipe.objects.get(slug="drive")
    assert recipe.kind == "driven" and recipe.name == "driven test"


def test_the_recipe_page_shows_the_host_and_its_pool(client, viewer, make_recipe):
    recipe = make_recipe(GOOD, slug="drive")
    client.force_login(viewer)
    body = client.get(reverse("recipe_detail", args=[recipe.slug])).content.decode()
    assert "drives a loop over researcher, drafter" in body and "at most 3 iterations" in body
