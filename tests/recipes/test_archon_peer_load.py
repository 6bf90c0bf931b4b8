"""What a peer's `.archon` folder means, decided when its workflows load: literal fan-out
lists, model aliases and the default assistant of `.archon/config.yaml`, and the rewrites
made once per recipe version."""

from __future__ import annotations

import io
from unittest import mock

import pytest
from django.core.management import call_command
from django.urls import reverse

from recipes.models import Recipe
from recipes.sync import sync
from recipes.validation import validate_source
from runs.executor import spec as spec_cache
from tests.archon_peer import make_peer_repo
from tests.console.conftest import login

pytestmark = pytest.mark.django_db


@pytest.fixture
def archon_checkout(tmp_path, settings):
    root = make_peer_repo(tmp_path / "checkout")
    settings.LOOP_USER_RECIPE_DIR = str(tmp_path / "user")
    settings.LOOP_RECIPE_DIRS = [str(root)]
    settings.LOOP_DEFAULT_PROVIDER = ""
    return root


def flow(repo, body: str, name: str = "t"):
    path = repo / ".archon" / "workflows" / f"{name}.yaml"
    path.write_text(body)
    return validate_source(body, str(path))


FAN = "name: t\nnodes:\n  - id: each\n    workflow: peer-item\n    fan_out: {{items: {items}}}\n"


@pytest.mark.parametrize(
    "items,expected",
    [
        ('\'["one", "two", "fail-3"]\'', ["one", "two", "fail-3"]),
        ("[one, two, fail-3]", ["one", "two", "fail-3"]),
        ("'[1, {\"a\": true}]'", [1, {"a": True}]),
        ("'[]'", []),
    ],
)
def test_a_literal_fan_out_list_is_kept_as_a_list(archon_checkout, items, expected):
    result = flow(archon_checkout, FAN.format(items=items))
    assert result.ok, result.errors
    assert result.spec.node("each").fan_out.items == expected


@pytest.mark.parametrize(
    "items,message",
    [
        ("'{\"a\": 1}'", "fan_out.items must be a list, not the JSON dict"),
        ("'one, two'", "must name an upstream output that is a JSON list"),
        ("[one, null]", "fan_out.items item 2 is empty (null)"),
    ],
)
def test_a_literal_fan_out_list_is_checked_at_load(archon_checkout, items, message):
    result = flow(archon_checkout, FAN.format(items=items))
    assert [p.line for p in result.errors] == [5], result.errors
    assert message in result.errors[0].message


MODELS = """
name: t
{top}nodes:
  - id: a
    provider: {provider}
    model: '{model}'
    prompt: hi
providers:
  house: {{kind: command, command: 'true'}}
  mini-agent: {{kind: command, command: 'true'}}
"""


def test_a_model_alias_resolves_to_its_provider_and_model(archon_checkout):
    result = flow(archon_checkout, MODELS.format(top="", provider="house", model="@mini"))
    assert result.ok, result.errors
    node = result.spec.node("a")
    assert (node.provider, node.model) == ("mini-agent", "tiny-1")
    (warning,) = [w for w in result.warnings if "gives way" in w.message]
    assert "provider 'house' gives way to 'mini-agent', the provider of model alias '@mini'" in (
        warning.message
    )


def test_a_workflow_model_alias_sets_the_workflow_provider(archon_checkout):
    body = MODELS.format(top="model: '@mini'\n", provider="mini-agent", model="@mini")
    result = flow(archon_checkout, body)
    assert result.ok, result.errors
    assert (result.spec.provider, result.spec.model) == ("mini-agent", "tiny-1")


def test_an_unknown_alias_is_an_error_naming_the_declared_ones(archon_checkout):
    result = flow(archon_checkout, MODELS.format(top="", provider="house", model="@huge"))
    (error,) = result.errors
    assert error.line == 6
    assert "model alias '@huge' is not defined (declared in .archon/config.yaml: @mini)" in (
        error.message
    )


def test_an_alias_outside_a_repository_is_an_error(tmp_path, settings):
    settings.LOOP_RECIPE_DIRS = []
    body = MODELS.format(top="", provider="house", model="@mini")
    result = validate_source(body, str(tmp_path / "t.yaml"))
    assert "model alias '@mini' is not defined" in result.errors[0].message


def test_the_default_assistant_answers_for_nodes_without_a_provider(archon_checkout):
    body = "name: t\nproviders:\n  house: {kind: command, command: 'true'}\nnodes:\n"
    body += "  - {id: a, prompt: hi}\n"
    result = flow(archon_checkout, body)
    assert result.ok, result.errors
    assert result.spec.default_provider == "house" and result.spec.provider is None
    (archon_checkout / ".archon" / "config.yaml").unlink()
    result = flow(archon_checkout, body)
    assert "no provider is named and no default provider is set" in result.errors[0].message


def test_the_recipe_list_says_which_default_provider_a_repository_gives(
    archon_checkout, client, viewer, settings
):
    sync()
    note = "default provider: house (the repository&#x27;s .archon/config.yaml)"
    body = login(client, viewer).get(reverse("recipe_list")).content.decode()
    assert body.count(note) == len(Recipe.objects.filter(origin="project"))
    out = io.StringIO()
    call_command("recipe", "ls", stdout=out)
    line = next(x for x in out.getvalue().splitlines() if x.startswith("peer-join "))
    assert line.endswith("[default provider: house (the repository's .archon/config.yaml)]")
    settings.LOOP_DEFAULT_PROVIDER = "demo"  # the console's own default comes first
    body = client.get(reverse("recipe_list")).content.decode()
    assert "default provider: house" not in body


def test_rewriting_happens_once_per_recipe_version_not_per_step(archon_checkout):
    sync()
    recipe = Recipe.objects.get(slug="peer-literal")
    spec_cache._load.cache_clear()
    from loops.workflow import peer_meaning

    real = peer_meaning.rewrite_literal_references
    with mock.patch.object(peer_meaning, "rewrite_literal_references", side_effect=real) as rewrite:
        first = spec_cache.spec_of(recipe, recipe.current_version)
        calls = rewrite.call_count
        for _ in range(5):
            assert spec_cache.spec_of(recipe, recipe.current_version) is first
    assert calls == 4 and rewrite.call_count == calls  # its 4 bash nodes, once
    assert "'\"$say.output\"'" in first.node("quoted").bash
