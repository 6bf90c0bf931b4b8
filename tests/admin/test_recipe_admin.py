"""Editing recipes in the admin: validation on save, versions, diffs, actions, import."""

import io
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from recipes.models import Recipe
from runs.actor import Actor

pytestmark = pytest.mark.django_db

GOOD = """name: hello
description: says hello
nodes:
  - id: greet
    bash: echo hello
"""

BROKEN = """name: hello
description: says hello
nodes:
  - id: greet
    bash: echo hello
  - id: again
    depends_on: [nowhere]
    bash: echo again
"""


def change_url(recipe):
    return reverse("admin:recipes_recipe_change", args=[recipe.pk])


def post_change(client, recipe, source, **extra):
    data = {"enabled": "on", "source": source, "note": "", **extra}
    return client.post(change_url(recipe), data)


@pytest.fixture
def recipe(make_recipe):
    return make_recipe(GOOD, slug="hello")


def test_change_form_has_the_line_numbered_editor(editor_client, recipe):
    page = editor_client.get(change_url(recipe))
    html = page.content.decode()
    assert page.status_code == 200
    assert 'class="recipe-source"' in html
    assert "js/recipe-editor.js" in html and "css/recipe-editor.css" in html
    assert "<script>" not in html.replace("<script src", "")  # CSP: files only


def test_saving_an_invalid_source_is_refused_with_its_line(editor_client, recipe):
    response = post_change(editor_client, recipe, BROKEN)
    assert response.status_code == 200  # the form again, not a redirect
    html = response.content.decode()
    assert "line 7" in html and "nodes[1].depends_on" in html
    assert 'data-error-lines="7"' in html
    recipe.refresh_from_db()
    assert recipe.source == GOOD
    assert recipe.versions.count() == 1


def test_unparseable_yaml_is_a_form_error_not_a_crash(editor_client, recipe):
    response = post_change(editor_client, recipe, "name: [unclosed\n  - : :\n\t")
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()


def test_saving_a_valid_change_records_a_version(editor_client, staff_editor, recipe):
    fixed = GOOD.replace("echo hello", "echo hello again")
    response = post_change(editor_client, recipe, fixed, note="louder")
    assert response.status_code == 302
    recipe.refresh_from_db()
    assert recipe.source == fixed
    latest = recipe.current_version
    assert (latest.number, latest.author, latest.note) == (2, staff_editor, "louder")
    assert recipe.edited_locally is False  # created in the console, nothing to protect


def test_warnings_are_shown_and_the_save_goes_through(editor_client, recipe):
    from recipes.validation import validate_source

    with_warning = GOOD + "unknown_top_level_key: 1\n"
    assert validate_source(with_warning).ok and validate_source(with_warning).warnings
    response = post_change(editor_client, recipe, with_warning)
    assert response.status_code == 302
    page = editor_client.get(response.url)
    assert "Warning:" in page.content.decode()
    recipe.refresh_from_db()
    assert recipe.current_version.number == 2


def test_editing_a_synced_recipe_marks_it(editor_client, bundled):
    recipe = bundled["counter-loop"]
    post_change(editor_client, recipe, recipe.source + "# tweaked\n")
    recipe.refresh_from_db()
    assert recipe.edited_locally is True
    assert recipe.origin == Recipe.Origin.BUILTIN


def test_adding_a_recipe_creates_its_first_version(editor_client, staff_editor):
    response = editor_client.post(
        reverse("admin:recipes_recipe_add"), {"slug": "fresh", "enabled": "on", "source": GOOD}
    )
    assert response.status_code == 302
    recipe = Recipe.objects.get(slug="fresh")
    assert recipe.origin == Recipe.Origin.CONSOLE
    assert recipe.name == "hello"
    assert recipe.current_version.number == 1 and recipe.current_version.author == staff_editor
    assert recipe.current_version.note == "created" and recipe.versions.count() == 1


def test_versions_are_listed_and_diffed(editor_client, recipe):
    post_change(editor_client, recipe, GOOD.replace("echo hello", "echo <b>bye</b>"))
    page = editor_client.get(change_url(recipe)).content.decode()
    assert "v2" in page and "edie" in page and "diff with previous" in page
    diff = editor_client.get(
        reverse("admin:recipes_recipe_diff", args=[recipe.pk]), {"a": 1, "b": 2}
    )
    html = diff.content.decode()
    assert diff.status_code == 200
    assert "-    bash: echo hello" in html
    assert "+    bash: echo &lt;b&gt;bye&lt;/b&gt;" in html  # escaped
    assert "1 line(s) added, 1 removed" in html


def test_diff_view_tolerates_bad_version_numbers(editor_client, recipe):
    url = reverse("admin:recipes_recipe_diff", args=[recipe.pk])
    assert editor_client.get(url, {"a": "x", "b": "999"}).status_code == 200


def test_viewer_sees_recipes_read_only(viewer_client, recipe):
    page = viewer_client.get(change_url(recipe))
    assert page.status_code == 200
    assert 'class="recipe-source"' not in page.content.decode()
    refused = post_change(viewer_client, recipe, GOOD + "# mine\n")
    assert refused.status_code == 403
    assert viewer_client.get(reverse("admin:recipes_recipe_import")).status_code == 403


def action(client, name, *recipes):
    return client.post(
        reverse("admin:recipes_recipe_changelist"),
        {"action": name, "_selected_action": [r.pk for r in recipes]},
    )


def test_export_one_recipe_as_yaml(editor_client, recipe):
    response = action(editor_client, "export_yaml", recipe)
    assert response["Content-Type"] == "application/yaml"
    assert 'filename="hello.yaml"' in response["Content-Disposition"]
    assert response.content.decode() == GOOD


def test_export_several_as_a_zip(editor_client, recipe, make_recipe):
    other = make_recipe(GOOD.replace("hello", "other"), slug="other")
    response = action(editor_client, "export_yaml", recipe, other)
    archive = zipfile.ZipFile(io.BytesIO(response.content))
    assert sorted(archive.namelist()) == ["hello.yaml", "other.yaml"]


def test_duplicate(editor_client, staff_editor, bundled):
    action(editor_client, "duplicate", bundled["counter-loop"])
    copy = Recipe.objects.get(slug="counter-loop-copy")
    assert copy.origin == Recipe.Origin.CONSOLE and copy.source == bundled["counter-loop"].source
    assert copy.current_version.author == staff_editor


def test_validate_action_reports(editor_client, recipe):
    response = action(editor_client, "validate", recipe)
    assert response.status_code == 302
    assert "Recipe hello: valid" in editor_client.get(response.url).content.decode()


def test_start_a_run_action_opens_the_start_form(editor_client, recipe):
    response = action(editor_client, "start_run", recipe)
    assert response.status_code == 302
    assert response.url.endswith("/recipes/hello/start/")


def test_import_valid_and_invalid_files(editor_client, staff_editor):
    files = [
        SimpleUploadedFile("imported-one.yaml", GOOD.encode(), "application/yaml"),
        SimpleUploadedFile("broken.yaml", BROKEN.encode(), "application/yaml"),
        SimpleUploadedFile("binary.yaml", b"\xff\xfe\x00", "application/yaml"),
    ]
    response = editor_client.post(reverse("admin:recipes_recipe_import"), {"files": files})
    html = response.content.decode()
    assert response.status_code == 200
    imported = Recipe.objects.get(slug="imported-one")
    assert imported.origin == Recipe.Origin.CONSOLE
    assert imported.current_version.author == staff_editor
    assert not Recipe.objects.filter(slug="broken").exists()
    assert "line 7" in html and "not UTF-8" in html


def test_import_refuses_an_existing_slug(editor_client, recipe):
    upload = SimpleUploadedFile("hello.yaml", GOOD.encode())
    html = editor_client.post(reverse("admin:recipes_recipe_import"), {"files": [upload]})
    assert "already exists" in html.content.decode()


def test_an_invalid_synced_recipe_shows_its_problems(editor_client, db):
    broken = Recipe.objects.create(
        slug="synced-broken",
        name="synced-broken",
        source=BROKEN,
        origin=Recipe.Origin.PROJECT,
        valid=False,
        problems={
            "errors": [
                {"path": "nodes[1].depends_on", "line": 7, "column": 5, "message": "unknown <x>"}
            ],
            "warnings": [],
        },
    )
    html = editor_client.get(change_url(broken)).content.decode()
    assert "line 7, nodes[1].depends_on: unknown &lt;x&gt;" in html
    assert 'data-error-lines="7"' in html


def test_a_refused_save_shows_the_warnings_beside_the_errors(editor_client, recipe):
    typo = (
        "name: typo\nprovider: demo\nnodes:\n  - id: polish\n    loop:\n"
        "      prompt: Improve it.\n      untill: DONE\n      max_iterations: 3\n"
    )
    html = post_change(editor_client, recipe, typo).content.decode()
    assert "at least one completion condition" in html
    assert "Warning: line 7, nodes[0].loop.untill" in html
    assert 'data-error-lines="5"' in html and 'data-warning-lines="7"' in html


def test_runs_cannot_be_added_in_the_admin(client, admin_user):
    client.force_login(admin_user)
    assert client.get(reverse("admin:runs_run_add")).status_code == 403
    changelist = client.get(reverse("admin:runs_run_changelist")).content.decode()
    assert reverse("admin:runs_run_add") not in changelist


def test_the_admin_says_loop_console_and_has_a_favicon(client, admin_user):
    client.force_login(admin_user)
    html = client.get(reverse("admin:index")).content.decode()
    assert "Loop Console" in html and "Django administration" not in html
    assert "Django site admin" not in html
    assert 'rel="icon" href="/static/favicon.svg"' in html
    title = client.get(reverse("admin:recipes_recipe_changelist")).content.decode()
    assert "| Loop Console admin</title>" in title


def test_a_run_is_read_only_in_the_admin(client, admin_user, bundled):
    from runs import services
    from runs.models import Run

    run = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(admin_user, "console"), message="look"
    )
    client.force_login(admin_user)
    url = reverse("admin:runs_run_change", args=[run.pk])
    page = client.get(url).content.decode()
    assert 'name="status"' not in page and 'name="last_seq"' not in page
    assert (
        f'href="/runs/{run.pk}/"'
        in client.get(reverse("admin:runs_run_changelist")).content.decode()
    )
    client.post(url, {"status": "completed", "last_seq": 0, "error": "edited"})
    run.refresh_from_db()
    assert run.status == "pending" and run.error == ""
    # A run still going cannot be deleted from under its workers; a finished one can.
    delete = reverse("admin:runs_run_delete", args=[run.pk])
    assert client.get(delete).status_code == 403
    Run.objects.filter(pk=run.pk).update(status="completed")
    assert client.get(delete).status_code == 200
