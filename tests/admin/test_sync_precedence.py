"""Recipe sources and precedence: project > user > bundled, and console edits survive a sync."""

from pathlib import Path

import pytest
from django.core.management import call_command

from recipes.models import Recipe
from recipes.sources import BUILTIN_DIR
from recipes.sync import sync

pytestmark = pytest.mark.django_db

BUILTIN_SOURCE = (BUILTIN_DIR / "counter-loop.yaml").read_text()


def variant(label: str) -> str:
    return BUILTIN_SOURCE.replace("description:", f"description: ({label})", 1)


@pytest.fixture
def sources(settings, tmp_path):
    """Empty user and project recipe folders wired into the settings."""
    user, first, second = tmp_path / "user", tmp_path / "project-a", tmp_path / "project-b"
    for folder in (user, first, second):
        folder.mkdir()
    settings.LOOP_USER_RECIPE_DIR = user
    settings.LOOP_RECIPE_DIRS = [str(first), str(second)]
    return {"user": user, "project": first, "second_project": second}


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    return path


def reports_by_slug():
    return {r.slug: r for r in sync()}


def test_bundled_recipes_load_with_their_origin(sources):
    reports = reports_by_slug()
    recipe = Recipe.objects.get(slug="counter-loop")
    assert recipe.origin == Recipe.Origin.BUILTIN
    assert recipe.source == BUILTIN_SOURCE
    assert reports["counter-loop"].action == "created"


def test_user_recipe_shadows_the_bundled_one(sources):
    path = write(sources["user"], "counter-loop.yaml", variant("user"))
    report = reports_by_slug()["counter-loop"]
    recipe = Recipe.objects.get(slug="counter-loop")
    assert (recipe.origin, recipe.source_path) == (Recipe.Origin.USER, str(path))
    assert "(user)" in recipe.description
    assert "shadows builtin:" in report.detail


def test_project_recipe_shadows_user_and_bundled(sources):
    write(sources["user"], "counter-loop.yaml", variant("user"))
    path = write(sources["project"], "counter-loop.yaml", variant("project"))
    report = reports_by_slug()["counter-loop"]
    recipe = Recipe.objects.get(slug="counter-loop")
    assert (recipe.origin, recipe.source_path) == (Recipe.Origin.PROJECT, str(path))
    assert "(project)" in recipe.description
    assert "builtin:" in report.detail and "user:" in report.detail


def test_first_listed_project_folder_wins(sources):
    write(sources["second_project"], "counter-loop.yaml", variant("second"))
    first = write(sources["project"], "counter-loop.yaml", variant("first"))
    sync()
    recipe = Recipe.objects.get(slug="counter-loop")
    assert recipe.source_path == str(first)


def test_a_higher_source_appearing_later_takes_over(sources):
    sync()
    assert Recipe.objects.get(slug="counter-loop").origin == Recipe.Origin.BUILTIN
    write(sources["project"], "counter-loop.yaml", variant("project"))
    assert reports_by_slug()["counter-loop"].action == "updated"
    recipe = Recipe.objects.get(slug="counter-loop")
    assert recipe.origin == Recipe.Origin.PROJECT
    assert recipe.current_version.number == 2


def test_resync_without_changes_adds_no_version(sources):
    sync()
    assert reports_by_slug()["counter-loop"].action == "unchanged"
    assert Recipe.objects.get(slug="counter-loop").versions.count() == 1


def test_console_edit_is_kept_unless_forced(sources, editor):
    from recipes.editing import save_source

    sync()
    recipe = Recipe.objects.get(slug="counter-loop")
    edited = recipe.source + "# edited in the admin\n"
    save_source(recipe, edited, user=editor, note="mine")
    assert recipe.edited_locally

    write(sources["project"], "counter-loop.yaml", variant("project"))
    report = reports_by_slug()["counter-loop"]
    recipe.refresh_from_db()
    assert report.action == "kept"
    assert recipe.source == edited and recipe.origin == Recipe.Origin.BUILTIN

    call_command("recipe", "sync", "--force", stdout=open("/dev/null", "w"))  # noqa: SIM115
    recipe.refresh_from_db()
    assert recipe.origin == Recipe.Origin.PROJECT
    assert "(project)" in recipe.source and not recipe.edited_locally
    assert [v.note for v in recipe.versions.order_by("number")] == [
        "synced from builtin",
        "mine",
        "synced from project",
    ]


def test_recipe_created_in_the_console_is_not_replaced_by_a_file(sources, make_recipe):
    mine = make_recipe(variant("console"), slug="counter-loop")
    write(sources["user"], "counter-loop.yaml", variant("user"))
    sync()
    mine.refresh_from_db()
    assert mine.origin == Recipe.Origin.CONSOLE and "(console)" in mine.source


def test_invalid_file_is_synced_but_marked_invalid(sources):
    write(sources["project"], "broken.yaml", "name: broken\nnodes: 3\n")
    report = reports_by_slug()["broken"]
    recipe = Recipe.objects.get(slug="broken")
    assert not recipe.valid
    assert "invalid" in report.action and "line 2" in report.detail


# --- `manage.py run start PATH` follows the same rule ----------------------------------------


def start_file(path: Path, *extra: str) -> str:
    from io import StringIO

    out = StringIO()
    call_command("run", "start", str(path), "--message", "go", *extra, stdout=out)
    return out.getvalue().strip()


def test_run_start_file_does_not_overwrite_a_console_edit(sources, editor):
    from django.core.management.base import CommandError

    from recipes.editing import save_source
    from runs.models import Run

    path = write(sources["project"], "counter-loop.yaml", variant("file"))
    start_file(path)
    recipe = Recipe.objects.get(slug="counter-loop")
    edited = recipe.source + "# edited in the console\n"
    save_source(recipe, edited, user=editor, note="mine")

    write(sources["project"], "counter-loop.yaml", variant("file, changed"))
    with pytest.raises(CommandError, match="edited in the console.*--force"):
        start_file(path)
    recipe.refresh_from_db()
    assert recipe.source == edited and recipe.edited_locally
    assert Run.objects.count() == 1

    run_id = int(start_file(path, "--force"))
    recipe.refresh_from_db()
    assert "(file, changed)" in recipe.source and not recipe.edited_locally
    assert Run.objects.get(pk=run_id).recipe_version == recipe.current_version


def test_run_start_file_reloads_a_changed_file(sources):
    path = write(sources["project"], "counter-loop.yaml", variant("one"))
    start_file(path)
    write(sources["project"], "counter-loop.yaml", variant("two"))
    start_file(path)
    recipe = Recipe.objects.get(slug="counter-loop")
    assert "(two)" in recipe.source
    assert [v.note for v in recipe.versions.order_by("number")] == ["started from a file"] * 2


def test_run_start_file_with_the_console_text_starts_it(sources, make_recipe):
    from runs.models import Run

    mine = make_recipe(variant("console"), slug="counter-loop")
    path = write(sources["project"], "counter-loop.yaml", variant("console"))
    run_id = int(start_file(path))
    assert Run.objects.get(pk=run_id).recipe_id == mine.pk
    mine.refresh_from_db()
    assert mine.origin == Recipe.Origin.CONSOLE
