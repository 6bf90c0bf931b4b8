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
