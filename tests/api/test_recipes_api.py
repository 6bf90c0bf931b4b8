"""/api/recipes: list, read, validate, create and change — per persona and per error."""

import pytest

from recipes.models import Recipe

pytestmark = pytest.mark.django_db

# No shell: editors may write it (shell needs the 'recipe author with shell' role).
GOOD = "name: hello\nprovider: demo\nnodes:\n  - id: greet\n    prompt: say hello\n"
BROKEN = "name: hello\nnodes:\n  - id: greet\n    bash: echo hi\n  - id: b\n    depends_on: [nope]\n    bash: x\n"


@pytest.fixture
def hello(make_recipe):
    return make_recipe(GOOD, slug="hello")


def test_list(as_viewer, hello):
    response = as_viewer.get("/api/recipes")
    assert response.status_code == 200
    assert [r["slug"] for r in response.body] == ["hello"]
    assert response.body[0]["origin"] == "console" and response.body[0]["version"] == 1


def test_detail_has_source_and_versions(as_viewer, hello):
    response = as_viewer.get("/api/recipes/hello")
    assert response.status_code == 200
    assert response.body["source"] == GOOD
    assert [v["number"] for v in response.body["versions"]] == [1]


def test_unknown_recipe_is_404(as_viewer):
    response = as_viewer.get("/api/recipes/nope")
    assert response.status_code == 404 and response.body["detail"]


def test_outsider_may_not_read(as_outsider, hello):
    assert as_outsider.get("/api/recipes").status_code == 403
    assert as_outsider.get("/api/recipes/hello").status_code == 403


def test_no_credentials_is_401(anonymous, hello):
    response = anonymous.get("/api/recipes")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_validate_reports_errors_with_lines(as_viewer):
    response = as_viewer.post("/api/recipes/validate", {"source": BROKEN})
    assert response.status_code == 200
    body = response.body
    assert body["valid"] is False
    assert body["errors"][0]["line"] == 6
    assert body["errors"][0]["path"].startswith("nodes[1].depends_on")
    assert set(body["errors"][0]) == {"path", "line", "column", "message"}
    assert as_viewer.post("/api/recipes/validate", {"source": GOOD}).body["valid"] is True


def test_validate_with_unparseable_yaml_is_not_a_crash(as_viewer):
    response = as_viewer.post("/api/recipes/validate", {"source": "a: [\n\t- :"})
    assert response.status_code == 200 and response.body["valid"] is False


def test_malformed_body_is_400(as_editor):
    assert as_editor.post("/api/recipes/validate", raw="{not json").status_code == 400
    assert as_editor.post("/api/recipes", raw="{not json").status_code == 400


def test_missing_field_is_422(as_editor):
    response = as_editor.post("/api/recipes/validate", {})
    assert response.status_code == 422 and "source" in response.body["detail"]


def test_editor_creates_a_recipe(as_editor, editor):
    response = as_editor.post("/api/recipes", {"source": GOOD, "note": "first"})
    assert response.status_code == 201
    assert response.body["slug"] == "hello"  # from the recipe's name
    recipe = Recipe.objects.get(slug="hello")
    assert recipe.origin == "console" and recipe.current_version.author == editor


def test_create_with_explicit_slug_and_conflict(as_editor, hello):
    assert as_editor.post("/api/recipes", {"source": GOOD, "slug": "hi"}).status_code == 201
    conflict = as_editor.post("/api/recipes", {"source": GOOD, "slug": "hello"})
    assert conflict.status_code == 409 and "already exists" in conflict.body["detail"]
    bad = as_editor.post("/api/recipes", {"source": GOOD, "slug": "Not A Slug"})
    assert bad.status_code == 422


def test_create_invalid_source_is_422_with_problems(as_editor):
    response = as_editor.post("/api/recipes", {"source": BROKEN})
    assert response.status_code == 422
    assert response.body["errors"][0]["line"] == 6
    assert not Recipe.objects.exists()


def test_editor_changes_a_recipe_and_a_version_is_recorded(as_editor, editor, hello):
    changed = GOOD.replace("hello\n", "hello there\n")
    response = as_editor.put("/api/recipes/hello", {"source": changed, "note": "friendlier"})
    assert response.status_code == 200
    assert [v["number"] for v in response.body["versions"]] == [2, 1]
    assert response.body["versions"][0]["author"] == "edie"
    assert response.body["versions"][0]["note"] == "friendlier"
    hello.refresh_from_db()
    assert hello.source == changed


def test_change_can_disable(as_editor, hello):
    response = as_editor.put("/api/recipes/hello", {"source": GOOD, "enabled": False})
    assert response.status_code == 200 and response.body["enabled"] is False
    assert response.body["version"] == 1  # same source, no new version


def test_invalid_change_is_refused(as_editor, hello):
    response = as_editor.put("/api/recipes/hello", {"source": BROKEN})
    assert response.status_code == 422
    assert response.body["errors"][0]["line"] == 6
    hello.refresh_from_db()
    assert hello.source == GOOD and hello.versions.count() == 1


def test_changing_a_synced_recipe_protects_it_from_sync(as_editor, bundled):
    source = bundled["counter-loop"].source + "# local\n"
    assert as_editor.put("/api/recipes/counter-loop", {"source": source}).status_code == 200
    assert Recipe.objects.get(slug="counter-loop").edited_locally


def test_put_unknown_is_404(as_editor):
    assert as_editor.put("/api/recipes/nope", {"source": GOOD}).status_code == 404


@pytest.mark.parametrize("persona", ["as_viewer", "as_operator", "as_outsider"])
def test_only_editors_write(request, persona, hello):
    client = request.getfixturevalue(persona)
    assert client.post("/api/recipes", {"source": GOOD, "slug": "x"}).status_code == 403
    assert client.put("/api/recipes/hello", {"source": GOOD}).status_code == 403
