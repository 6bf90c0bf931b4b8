"""A step-machine role's provider is checked like a workflow's: a recipe none of whose
providers can answer is refused with a line (and the recipe list says why), rather than
started and left `running` while its first turn fails. The run-time half (a turn that
cannot run blocks the run) is tests/kernel/test_first_work_impossible.py."""

import pytest
from django.core.management import call_command
from django.test import Client

from loops.stepmachine.spec import PlaneSpec
from recipes.models import Recipe
from recipes.validation import validate_source
from runs.models import ProviderConfig
from runs.providers import registry
from runs.providers.base import ProviderError
from tests.console.conftest import login

pytestmark = pytest.mark.django_db

NOWHERE = """\
schema: planeai.loop.recipe.v1
id: nowhere
name: Nowhere
roles:
  maker: {provider: nowhere, mode: write}
steps:
  - {id: make, kind: session.create, role: maker, prompt: Go.}
"""


def test_the_bundled_no_mistakes_needs_a_default_provider_and_says_so(bundled, operator):
    recipe = bundled["no-mistakes"]
    assert not recipe.valid
    messages = [p["message"] for p in recipe.problems["errors"]]
    assert any(
        m.startswith("role 'reviewer' uses the default provider, but no default provider is set")
        for m in messages
    ), messages
    assert bundled["no-mistakes-demo"].valid  # names the demo agent: runs anywhere
    client = Client()
    login(client, operator)
    page = client.get("/recipes/").content.decode()
    assert "uses the default provider, but no default provider is set" in page

    # Marking a provider as the default makes it runnable at once, without a sync...
    house = ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    recipe.refresh_from_db()
    assert recipe.valid and recipe.problems["errors"] == []
    # ... and removing it says so again.
    house.delete()
    recipe.refresh_from_db()
    assert not recipe.valid


def test_loop_recipe_validate_exits_non_zero_without_a_default_provider(bundled, capsys):
    with pytest.raises(SystemExit) as exc:
        call_command("loop", "recipe", "validate", "no-mistakes")
    assert exc.value.code == 1
    assert "uses the default provider, but no default provider is set" in capsys.readouterr().out


def test_a_role_naming_a_provider_configured_nowhere_is_refused_on_its_line(settings):
    settings.LOOP_DEFAULT_PROVIDER = "demo"
    (problem,) = validate_source(NOWHERE).errors
    assert (problem.line, problem.path) == (5, "roles.maker.provider")
    assert "provider 'nowhere' is not configured" in problem.message
    assert "declares no providers of its own" in problem.message
    ProviderConfig.objects.create(name="nowhere", kind="demo")
    assert validate_source(NOWHERE).ok


def test_at_run_time_the_message_does_not_send_the_author_to_a_providers_map():
    spec = PlaneSpec.model_validate(
        {
            "schema": "planeai.loop.recipe.v1",
            "id": "x",
            "name": "x",
            "steps": [{"id": "a", "kind": "loop.event", "event_kind": "e"}],
        }
    )
    with pytest.raises(ProviderError) as exc:
        registry.resolve("nowhere", spec, None)
    assert "not configured" in str(exc.value) and "providers:" not in str(exc.value)


def test_a_runs_pinned_version_loads_whatever_the_providers_became(bundled):
    """Checking providers is for a recipe about to start: a run already started keeps
    loading its version (its turn then fails, saying why)."""
    from runs.executor.spec import spec_of

    recipe = Recipe.objects.get(slug="no-mistakes")
    assert spec_of(recipe, recipe.current_version).id == "no-mistakes"
