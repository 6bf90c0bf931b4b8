"""Load rules the seed designs state, checked at load with the line they are about."""

from __future__ import annotations

import textwrap

from recipes.formats.resources import Resources
from recipes.loader import load_recipe


def y(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def error_of(result, fragment: str):
    assert not result.ok
    hits = [p for p in result.errors if fragment in p.message]
    assert hits, [str(p) for p in result.errors]
    return hits[0]


NESTED = y("""
    name: nested
    provider: demo
    nodes:
      - id: outer
        loop_group:
          until: DONE
          max_iterations: 3
          nodes:
            - id: inner
              loop_group:
                until_bash: "true"
                max_iterations: 2
                nodes:
                  - id: a
                    bash: echo hi
    """)


def test_a_nested_loop_group_is_refused_at_load_with_its_line():
    problem = error_of(load_recipe(NESTED), "cannot be inside another loop_group's body")
    assert problem.line == 10 and "'outer'" in problem.message


def test_a_nested_loop_group_through_an_include_is_refused(tmp_path):
    (tmp_path / "inner.yaml").write_text(
        y("""
        name: inner
        nodes:
          - id: again
            loop_group:
              until_bash: "true"
              max_iterations: 2
              nodes:
                - id: a
                  bash: echo hi
        """)
    )
    source = y("""
        name: outer
        nodes:
          - id: outer
            loop_group:
              until: DONE
              max_iterations: 3
              nodes:
                - id: inc
                  include: inner
        """)
    resources = Resources(
        workflow_dirs=(tmp_path,),
        find_workflow=lambda name: tmp_path / f"{name}.yaml",
    )
    result = load_recipe(source, resources=resources)
    problem = error_of(result, "cannot be inside another loop_group's body")
    assert problem.line == 8


def test_a_single_level_loop_group_still_loads():
    flat = y("""
        name: flat
        provider: demo
        nodes:
          - id: outer
            loop_group:
              until: DONE
              max_iterations: 3
              nodes:
                - id: a
                  bash: echo hi
        """)
    assert load_recipe(flat).ok


# --- Python recipes: what would fail when run is refused at validation, with its line ------

from loops.python.format import parse_python  # noqa: E402

AGENTS = y("""
    from loops.python import Agent, LoopWorkflow

    named = Agent(name="a", instructions="x", provider="demo")
    unnamed = Agent(name="b", instructions="y")
    workflow = LoopWorkflow(agents=[named, unnamed], max_iterations=2)
    """)


def test_a_python_agent_without_provider_is_refused_when_no_default_exists():
    (problem,) = parse_python(AGENTS, "t", provider_fallback=False).errors
    assert problem.line == 4 and "names no provider" in problem.message
    assert parse_python(AGENTS, "t", provider_fallback=True).ok


def test_a_python_agent_whose_model_is_an_object_has_a_provider():
    source = AGENTS.replace('instructions="y")', 'instructions="y", model=llm)')
    assert parse_python(source, "t", provider_fallback=False).ok


def test_python_compile_errors_are_refused_with_their_line():
    awaited = AGENTS + "result = await workflow.run('go')\n"
    (problem,) = parse_python(awaited, "t").errors
    assert problem.line == 6 and "'await' outside function" in problem.message
    broken = AGENTS.replace("max_iterations=2)", "max_iterations=2")
    assert parse_python(broken, "t").errors[0].line >= 5


def test_agent_model_given_an_object_uses_it_as_the_provider():
    from loops.python import Agent

    class Llm:  # the provider protocol (docs/python.md)
        structured_output = "best_effort"

        def run(self, request, on_chunk): ...

    llm = Llm()
    agent = Agent(model=llm, name="w", instructions="write")
    assert agent.provider is llm and agent.model is None
    assert Agent(model="opus", name="w", instructions="x").model == "opus"


def test_a_binding_directive_from_loop_prev_is_refused_naming_the_string_form():
    source = y("""
        name: bind
        provider: demo
        nodes:
          - id: g
            loop_group:
              until: DONE
              max_iterations: 2
              nodes:
                - id: t
                  bash: printf red
                - id: s
                  depends_on: [t]
                  script: "print(1)"
                  runtime: uv
                  with:
                    prev: {from: $LOOP_PREV.t.output}
        """)
    problem = error_of(load_recipe(source), "cannot read $LOOP_PREV")
    assert problem.line == 16 and "prev: $LOOP_PREV.t.output" in problem.message


def test_a_missing_command_file_says_where_to_create_it(tmp_path):
    source = y("""
        name: cmd
        provider: demo
        nodes:
          - id: implement
            loop:
              command: archon-ralph-implement
              until: COMPLETE
              max_iterations: 3
        """)
    result = load_recipe(source, resources=Resources(commands_dirs=(tmp_path, tmp_path / "more")))
    problem = error_of(result, "not found (archon-ralph-implement.md)")
    assert problem.message.endswith(f"create it as {tmp_path / 'archon-ralph-implement.md'}")


def prev_group(body_node: str) -> str:
    """A loop_group whose body node `s` (its lines from 13 on) reads node `t`."""
    head = y("""
        name: prev
        provider: demo
        nodes:
          - id: g
            loop_group:
              until: DONE
              max_iterations: 3
              nodes:
                - id: t
                  bash: printf red
                  output_format: {type: object, properties: {score: {type: number}}}
                - id: s
        """)
    return head + textwrap.indent(y(body_node), " " * 10)


def test_loop_prev_history_indexing_is_refused_with_its_line():
    source = prev_group("""
        depends_on: [t]
        prompt: |
          Fix what failed.
          Two passes ago: $LOOP_PREV.t.output[1]
        """)
    problem = error_of(load_recipe(source), "history indexing is not supported")
    assert problem.line == 16, str(problem)
    assert "$LOOP_PREV.t.output[1]" in problem.message
    assert "$LOOP_PREV.t.output" in problem.message and "$ARTIFACTS_DIR" in problem.message
    when = prev_group("""
        depends_on: [t]
        when: "$LOOP_PREV.t.output[0] == 'red'"
        bash: echo again
        """)
    assert error_of(load_recipe(when), "history indexing").line == 14


def test_loop_prev_suffixes_the_design_does_not_define_are_refused():
    deeper = prev_group("depends_on: [t]\nprompt: 'Was $LOOP_PREV.t.output.score.value'\n")
    problem = error_of(load_recipe(deeper), "reads one field")
    assert problem.line == 14 and "$LOOP_PREV.t.output.score" in problem.message
    for wrong in ("$LOOP_PREV.t.outputs", "$LOOP_PREV.t.text", "$LOOP_PREV.t"):
        source = prev_group(f"depends_on: [t]\nprompt: 'Was {wrong} red?'\n")
        problem = error_of(load_recipe(source), "is not a reference")
        assert problem.line == 14 and wrong in problem.message


def test_the_loop_prev_forms_the_design_defines_still_load():
    source = prev_group("""
        depends_on: [t]
        prompt: "Last: $LOOP_PREV.t.output. Score $LOOP_PREV.t.output.score, $LOOP_PREV_OUTPUT."
        """)
    result = load_recipe(source)
    assert result.ok, [str(p) for p in result.errors]
