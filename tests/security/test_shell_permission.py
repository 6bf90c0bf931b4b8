"""Writing shell is its own permission: editors change prompts and descriptions, only a
recipe author with shell adds, changes or removes the parts that run on a worker. Enforced
in the one save path (recipes.editing), so the admin, the API and the CLI agree."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import CommandError, call_command
from django.test import Client
from django.urls import reverse

from recipes import editing
from recipes.loader import load_recipe
from recipes.models import Recipe
from recipes.shell_parts import shell_parts
from runs import kinds
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db

WITH_SHELL = """name: builder
description: builds things
provider: demo
nodes:
  - id: plan
    prompt: Plan the build of $USER_MESSAGE
  - id: build
    depends_on: [plan]
    bash: echo building
"""
PROMPT_CHANGED = WITH_SHELL.replace("Plan the build of", "Plan carefully the build of").replace(
    "builds things", "builds things well"
)
BASH_CHANGED = WITH_SHELL.replace("echo building", "echo built differently")
BASH_REMOVED = WITH_SHELL.replace(
    "  - id: build\n    depends_on: [plan]\n    bash: echo building\n", ""
)
CHECK_ADDED = WITH_SHELL.replace(
    "  - id: build",
    "  - id: fix\n    loop:\n      prompt: go\n      until_bash: 'true'\n"
    "      max_iterations: 2\n  - id: build",
)
PROVIDER_ADDED = WITH_SHELL.replace(
    "provider: demo\n", "provider: demo\nproviders:\n  mine: {kind: command, command: cat}\n"
)
NO_SHELL = "name: talker\nprovider: demo\nnodes:\n  - id: talk\n    prompt: hello\n"


@pytest.fixture
def recipe(make_recipe):
    return make_recipe(WITH_SHELL, slug="builder")


def test_the_role_exists_and_holds_the_permission(shell_author, editor):
    group = Group.objects.get(name="recipe author with shell")
    assert group.permissions.filter(codename="write_shell").exists()
    assert shell_author.has_perm("recipes.write_shell")
    assert editor.has_perm("recipes.change_recipe") and not editor.has_perm("recipes.write_shell")


@pytest.mark.parametrize(
    "source", [BASH_CHANGED, BASH_REMOVED, CHECK_ADDED, PROVIDER_ADDED], ids=str.__len__
)
def test_every_change_of_shell_parts_is_listed(source):
    before, after = shell_parts(load_recipe(WITH_SHELL)), shell_parts(load_recipe(source))
    assert editing.shell_changes(before, after)


def test_shell_parts_of_a_workflow_name_each_place():
    parts = shell_parts(
        load_recipe(
            CHECK_ADDED.replace(
                "provider: demo\n",
                "provider: demo\nproviders:\n  p: {kind: command, command: cat}\n",
            )
        )
    )
    assert set(parts) == {"nodes.build.bash", "nodes.fix.loop.until_bash", "providers.p"}


def test_a_kind_says_its_own_shell_parts():
    class Spec:
        gates = {"tests": "make test"}

    class Gated(kinds.LoopKind):
        name = "test-kind"

        def shell_parts(self, spec):
            return {f"gates.{k}.run": v for k, v in spec.gates.items()}

    result = type("Result", (), {"kind": "test-kind", "spec": Spec()})()
    kinds.register(Gated())
    try:
        assert shell_parts(result, "source") == {"gates.tests.run": "make test"}
    finally:
        kinds.unregister("test-kind")


def test_a_kind_that_declares_nothing_has_its_whole_source_as_shell():
    """Fails closed: a kind without `shell_parts`, or one no installed app registers."""

    class Silent(kinds.LoopKind):
        name = "silent-kind"

    result = type("Result", (), {"kind": "silent-kind", "spec": object()})()
    assert shell_parts(result, "the text") == {"source": "the text"}  # not registered
    kinds.register(Silent())
    try:
        assert shell_parts(result, "the text") == {"source": "the text"}
    finally:
        kinds.unregister("silent-kind")


# --- the one save path ------------------------------------------------------------------


def test_an_editor_changes_prompts_and_descriptions_of_a_recipe_with_shell(recipe, editor):
    editing.save_source(recipe, PROMPT_CHANGED, user=editor)
    recipe.refresh_from_db()
    assert recipe.description == "builds things well"
    assert recipe.current_version.number == 2


@pytest.mark.parametrize("source", [BASH_CHANGED, BASH_REMOVED, CHECK_ADDED, PROVIDER_ADDED])
def test_an_editor_cannot_change_shell(recipe, editor, source):
    with pytest.raises(editing.ShellNotAllowed, match="recipe author with shell"):
        editing.save_source(recipe, source, user=editor)
    recipe.refresh_from_db()
    assert recipe.source == WITH_SHELL and recipe.current_version.number == 1


def test_an_editor_cannot_create_a_recipe_with_shell_but_can_without(editor):
    with pytest.raises(editing.ShellNotAllowed, match="nodes.build.bash"):
        editing.create_recipe(WITH_SHELL, user=editor)
    recipe, _ = editing.create_recipe(NO_SHELL, user=editor)
    assert recipe.slug == "talker"


def test_a_recipe_author_with_shell_changes_shell(recipe, shell_author):
    editing.save_source(recipe, BASH_CHANGED, user=shell_author)
    recipe.refresh_from_db()
    assert "differently" in recipe.source


# --- the API ----------------------------------------------------------------------------


def test_api_refuses_an_editors_shell_change_with_403_and_allows_prompts(recipe, editor):
    api = client_for(editor)
    refused = api.put("/api/recipes/builder", {"source": BASH_CHANGED})
    assert refused.status_code == 403
    assert "recipe author with shell" in refused.body["detail"]
    assert "nodes.build.bash" in refused.body["detail"]
    created = api.post("/api/recipes", {"source": WITH_SHELL, "slug": "other"})
    assert created.status_code == 403
    changed = api.put("/api/recipes/builder", {"source": PROMPT_CHANGED})
    assert changed.status_code == 200 and changed.body["description"] == "builds things well"


def test_api_lets_a_recipe_author_with_shell_change_shell(recipe, shell_author):
    api = client_for(shell_author)
    assert api.put("/api/recipes/builder", {"source": BASH_CHANGED}).status_code == 200
    assert api.post("/api/recipes", {"source": WITH_SHELL, "slug": "other"}).status_code == 201


# --- the admin --------------------------------------------------------------------------


def _admin(user) -> Client:
    user.is_staff = True
    user.save()
    client = Client()
    client.force_login(user)
    return client


def _post(client, recipe, source):
    url = reverse("admin:recipes_recipe_change", args=[recipe.pk])
    return client.post(url, {"enabled": "on", "source": source, "note": ""})


def test_admin_form_refuses_an_editors_shell_change_and_saves_a_prompt_change(recipe, editor):
    client = _admin(editor)
    refused = _post(client, recipe, BASH_CHANGED)
    assert refused.status_code == 200  # the form again, with the error
    assert "recipe author with shell" in refused.content.decode()
    recipe.refresh_from_db()
    assert recipe.source == WITH_SHELL
    assert _post(client, recipe, PROMPT_CHANGED).status_code == 302
    recipe.refresh_from_db()
    assert recipe.source == PROMPT_CHANGED


def test_admin_lets_a_recipe_author_with_shell_save_shell(recipe, shell_author):
    assert _post(_admin(shell_author), recipe, BASH_CHANGED).status_code == 302
    recipe.refresh_from_db()
    assert "differently" in recipe.source


# --- the command line -------------------------------------------------------------------


def test_cli_acting_as_an_editor_cannot_load_a_file_that_changes_shell(recipe, editor, tmp_path):
    Recipe.objects.filter(pk=recipe.pk).update(origin=Recipe.Origin.PROJECT)
    path = tmp_path / "builder.yaml"
    path.write_text(BASH_CHANGED)
    with pytest.raises(CommandError, match="edie: Changing shell in a recipe"):
        call_command("run", "start", str(path), "--user", "edie", "--force", "--message", "go")
    recipe.refresh_from_db()
    assert recipe.source == WITH_SHELL


def test_cli_without_user_installs_files_as_the_folder_owner(recipe, tmp_path, capsys):
    """Files on disk are installed by whoever controls the folder (and can read the worker's
    environment anyway): the command line itself is not limited."""
    path = tmp_path / "builder.yaml"
    path.write_text(BASH_CHANGED)
    call_command("run", "start", str(path), "--force", "--message", "go")
    recipe.refresh_from_db()
    assert "differently" in recipe.source


def test_script_nodes_are_shell_parts(editor, make_recipe):
    source = NO_SHELL + "  - id: calc\n    script: print(1)\n    runtime: uv\n"
    assert "nodes.calc.script" in shell_parts(load_recipe(source))
    with pytest.raises(editing.ShellNotAllowed, match="nodes.calc.script"):
        editing.create_recipe(source, user=editor)
