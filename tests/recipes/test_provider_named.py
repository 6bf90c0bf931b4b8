"""Defect 5: a recipe that names no provider is told so, never silently given the demo agent;
the demo agent keeps its session files out of the user's working tree."""

import pytest

from recipes.loader import load_recipe
from recipes.sources import BUILTIN_DIR
from recipes.validation import validate_source
from runs.models import ProviderConfig
from runs.providers import registry
from runs.providers.base import AgentRequest, ProviderError
from runs.providers.demo import DemoProvider

FORGETFUL = """name: forgetful
nodes:
  - id: setup
    bash: echo ready
  - id: draft
    prompt: Write a haiku.
  - id: polish
    loop_group:
      until: DONE
      max_iterations: 3
      nodes:
        - id: edit
          prompt: Improve it.
"""


def test_an_agent_node_without_a_provider_is_an_error_on_its_line():
    result = load_recipe(FORGETFUL, provider_fallback=False)
    assert not result.ok
    [problem] = result.errors
    assert problem.line == 5 and problem.path == "nodes[1]"
    assert "'draft' (and 'edit') calls an agent, but no provider is named" in problem.message
    assert "provider: demo" in problem.message


@pytest.mark.parametrize(
    "fix",
    [
        lambda s: s.replace("nodes:\n", "provider: demo\nnodes:\n", 1),
        lambda s: s.replace("Write a haiku.", "Write a haiku.\n    provider: demo").replace(
            "Improve it.", "Improve it.\n          provider: demo"
        ),
    ],
    ids=["top-level", "on-each-node"],
)
def test_naming_a_provider_at_the_top_or_on_the_nodes_is_enough(fix):
    assert load_recipe(fix(FORGETFUL), provider_fallback=False).ok


def test_steps_that_call_no_agent_need_no_provider():
    source = "name: shell\nnodes:\n  - id: a\n    bash: echo hi\n  - id: b\n    approval: ok?\n"
    assert load_recipe(source, provider_fallback=False).ok


@pytest.mark.django_db
def test_validation_knows_whether_a_default_provider_is_configured(settings):
    assert settings.LOOP_DEFAULT_PROVIDER == ""  # nothing by default
    assert "no provider is named" in str(validate_source(FORGETFUL).errors[0])
    ProviderConfig.objects.create(name="house", kind="demo", is_default=True)
    assert validate_source(FORGETFUL).ok
    ProviderConfig.objects.all().delete()
    settings.LOOP_DEFAULT_PROVIDER = "demo"
    assert validate_source(FORGETFUL).ok


# The specification's own recipe, kept verbatim: its roles use the default provider.
NEEDS_A_DEFAULT = {"no-mistakes.yaml"}


@pytest.mark.django_db
def test_bundled_recipes_name_their_provider():
    for path in sorted(BUILTIN_DIR.glob("*.yaml")):
        if path.name in NEEDS_A_DEFAULT:
            continue
        result = validate_source(path.read_text(), str(path))
        assert result.ok, (path.name, [str(p) for p in result.errors])


@pytest.mark.django_db
def test_a_step_with_no_provider_and_no_default_fails_saying_why():
    spec = load_recipe(FORGETFUL).spec
    with pytest.raises(ProviderError, match="no provider is named.*provider: demo"):
        registry.resolve(None, spec, None)


def test_demo_sessions_live_in_the_run_data_folder_not_the_working_tree(settings, tmp_path):
    settings.LOOP_DATA_DIR = tmp_path / "data"
    workdir = tmp_path / "checkout"
    workdir.mkdir()
    (workdir / "README.md").write_text("mine\n")
    demo = DemoProvider(delay=0)
    first = demo.run(AgentRequest(prompt="hi", workdir=str(workdir), run_id=41), lambda _: None)
    again = AgentRequest(prompt="hi", workdir=str(workdir), run_id=41, session_id=first.session_id)
    second = demo.run(again, lambda _: None)
    assert "turn 1 of session" in first.text and "turn 2 of session" in second.text
    assert [p.name for p in workdir.iterdir()] == ["README.md"]
    assert (settings.LOOP_DATA_DIR / "runs" / "41" / "demo-sessions").is_dir()
