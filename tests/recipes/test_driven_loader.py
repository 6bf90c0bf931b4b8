"""Loading ``kind: driven`` recipes: each rule points at the line to fix, as for workflows."""

from __future__ import annotations

import textwrap

import pytest

from loops.driven.spec import DrivenSpec
from recipes.loader import load_recipe
from tests.recipes.test_workflow_loader import assert_error, assert_warning


def y(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


VALID = """\
kind: driven
name: Launch note with self-critique
provider: demo
agents:
  researcher:
    instructions: Find three facts.
    output_schema: {type: object, properties: {facts: {type: array}}, required: [facts]}
  drafter: {instructions: Draft the note.}
  critic: {instructions: Critique the draft.}
  host:
    instructions: Drive the loop.
    loop:
      pool: [researcher, drafter, critic, host]
      max_iterations: 10
      hooks: {on_iteration_end: "loops.driven.example_hooks:first_line_only"}
      retry: 2
host: host
"""


def test_a_valid_recipe_loads_as_a_one_node_spec_of_kind_driven():
    result = load_recipe(VALID)
    assert result.ok, [str(p) for p in result.errors]
    assert result.kind == "driven" and result.warnings == []
    spec = result.spec
    assert isinstance(spec, DrivenSpec)
    assert spec.loop.pool == ["researcher", "drafter", "critic", "host"]
    assert spec.loop.max_iterations == 10 and spec.loop.retry == 2
    assert [(n.id, n.kind) for n in spec.nodes] == [("host", "driven")]
    assert spec.layers() == [["host"]]
    assert spec.node("researcher").kind == "pipeline_step"
    assert spec.node("researcher").output_format["required"] == ["facts"]


@pytest.mark.parametrize(
    "change, fragment, line, path",
    [
        (
            ("pool: [researcher, drafter, critic, host]", "pool: [researcher, ghost]"),
            "'ghost' is not a declared agent",
            13,
            "agents.host.loop.pool[1]",
        ),
        (
            ("pool: [researcher, drafter, critic, host]", "pool: [drafter, drafter]"),
            "'drafter' is listed twice",
            13,
            "agents.host.loop.pool[1]",
        ),
        (
            ("pool: [researcher, drafter, critic, host]", "pool: []"),
            "at least one agent",
            13,
            "agents.host.loop.pool",
        ),
        (
            ("max_iterations: 10", "max_iterations: 0"),
            "must be a positive integer",
            14,
            "agents.host.loop.max_iterations",
        ),
        (
            ("max_iterations: 10", "max_iterations: many"),
            "must be a positive integer",
            14,
            "agents.host.loop.max_iterations",
        ),
        (("      max_iterations: 10\n", ""), "max_iterations is required", 12, None),
        (("host: host", "host: boss"), "'boss' is not a declared agent", 17, "host"),
        (("host: host", "host: critic"), "needs a loop block", 9, "agents.critic"),
        (("host: host\n", ""), "names its host agent", 1, "host"),
        (("    instructions: Drive the loop.\n", ""), "needs instructions", 10, None),
        (("retry: 2", "retry: -1"), "must be at least 0", 16, "agents.host.loop.retry"),
        (
            (
                '"loops.driven.example_hooks:first_line_only"',
                '"loops.driven.example_hooks:no_such"',
            ),
            "has no 'no_such'",
            15,
            "agents.host.loop.hooks.on_iteration_end",
        ),
        (
            (
                '"loops.driven.example_hooks:first_line_only"',
                '"loops.driven.example_hooks.gone:hook"',
            ),
            "does not import",
            15,
            None,
        ),
        (
            ('"loops.driven.example_hooks:first_line_only"', '"os:system"'),
            "not one hooks may come from",
            15,
            None,
        ),
        (
            ('"loops.driven.example_hooks:first_line_only"', '"loops.driven.example_hooks:log"'),
            "is not a function",
            15,
            None,
        ),
        (
            ('on_iteration_end: "loops', 'on_iteration_ended: "loops'),
            "unknown hook 'on_iteration_ended'",
            15,
            None,
        ),
        (
            ("output_schema: {type: object", "output_schema: {type: objekt"),
            "not a valid JSON Schema",
            7,
            None,
        ),
    ],
)
def test_each_mistake_is_refused_with_its_line(change, fragment, line, path):
    old, new = change
    assert old in VALID
    assert_error(load_recipe(VALID.replace(old, new)), fragment, line, path)


def test_unknown_fields_are_warnings_with_their_line():
    source = VALID.replace(
        "  drafter: {instructions: Draft the note.}",
        "  drafter: {instructions: Draft the note., colour: red}",
    )
    source = source.replace("      retry: 2\n", "      retry: 2\n      patience: high\n")
    source += "owner: somebody\n"
    result = load_recipe(source)
    assert result.ok
    assert_warning(result, "unknown field 'colour'", 8, "agents.drafter.colour")
    assert_warning(result, "unknown loop field 'patience'", 17)
    assert_warning(result, "unknown top-level field 'owner'", 19)


def test_a_loop_block_off_the_host_is_ignored_with_a_warning():
    source = VALID.replace(
        "  critic: {instructions: Critique the draft.}",
        "  critic: {instructions: Critique the draft., loop: {pool: [drafter], max_iterations: 2}}",
    )
    result = load_recipe(source)
    assert result.ok
    assert_warning(result, "only the host's loop is used", 9)
    assert result.spec.agents["critic"].loop is None


def test_without_a_default_provider_each_agent_must_name_one():
    source = VALID.replace("provider: demo\n", "")
    result = load_recipe(source, provider_fallback=False)
    assert_error(result, "names no provider", 4, "agents.researcher")
    assert load_recipe(source, provider_fallback=True).ok


def test_hooks_come_only_from_allowed_modules(settings):
    settings.LOOP_HOOK_MODULES = ["tests.driven"]
    assert_error(load_recipe(VALID), "LOOP_HOOK_MODULES: tests.driven", 15)


def test_the_bundled_driven_recipe_validates():
    from recipes.sources import BUILTIN_DIR

    result = load_recipe((BUILTIN_DIR / "launch-note.yaml").read_text())
    assert result.ok, [str(p) for p in result.errors]
    assert result.kind == "driven" and not result.warnings


def test_workflow_recipes_are_unchanged_by_the_new_kind():
    result = load_recipe(
        y("""
        name: t
        provider: demo
        nodes:
          - {id: a, prompt: hi}
    """)
    )
    assert result.ok and result.kind == "workflow"


def test_the_designs_camel_case_spellings_are_read_as_written():
    """`maxIterations` and the hooks `onInit`, `onIterationEnd`, ... as the design writes
    them; the snake_case names stay."""
    camel = VALID.replace("max_iterations: 10", "maxIterations: 10").replace(
        "on_iteration_end:", "onIterationEnd:"
    )
    result = load_recipe(camel)
    assert result.ok and result.warnings == [], [str(p) for p in result.errors + result.warnings]
    assert result.spec.loop.max_iterations == 10
    assert result.spec.loop.hooks == {
        "on_iteration_end": "loops.driven.example_hooks:first_line_only"
    }


def test_one_field_spelled_both_ways_is_an_error():
    both = VALID.replace("max_iterations: 10", "max_iterations: 10\n      maxIterations: 5")
    assert_error(load_recipe(both), "'max_iterations' is given twice", 15)


def test_the_designs_error_handling_retry_sets_the_loops_retry():
    """`errorHandling: {retry: N}` (LoopConfig.errorHandling.retry in the design) bounds
    on_error's retries, as `retry: N` does."""
    result = load_recipe(VALID.replace("retry: 2", "errorHandling: {retry: 3}"))
    assert result.ok and result.warnings == [], [str(p) for p in result.errors + result.warnings]
    assert result.spec.loop.retry == 3


def test_error_handling_retry_and_retry_must_agree():
    same = VALID.replace("retry: 2", "retry: 2\n      errorHandling: {retry: 2}")
    assert load_recipe(same).spec.loop.retry == 2
    different = VALID.replace("retry: 2", "retry: 2\n      errorHandling: {retry: 4}")
    assert_error(
        load_recipe(different),
        "errorHandling.retry (4) and retry (2) disagree",
        17,
        "agents.host.loop.errorHandling.retry",
    )


def test_error_handling_mistakes_point_at_their_line():
    bad = VALID.replace("retry: 2", "errorHandling:\n        retry: -1")
    assert_error(load_recipe(bad), "must be at least 0", 17, "agents.host.loop.retry")
    unknown = VALID.replace("retry: 2", "errorHandling: {retry: 1, backoff: 5}")
    assert_warning(load_recipe(unknown), "unknown errorHandling field 'backoff'", 16)
    not_a_mapping = VALID.replace("retry: 2", "errorHandling: 3")
    assert_error(load_recipe(not_a_mapping), "errorHandling is a mapping", 16)
