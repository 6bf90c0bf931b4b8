"""Fixtures for fork, compare, chart and budget tests: recipes on the scripted agent
(tests/engine_worker) and Python loops on the demo agent."""

import pytest

from recipes.editing import create_recipe
from recipes.models import Recipe
from tests.engine_worker.conftest import (  # noqa: F401 - make_scripted_recipe: a fixture
    PROVIDERS,
    calls,
    iterations,
    make_scripted_recipe,
    node,
)

PYTHON_LOOP = '''"""Scored writer"""
from pydantic import BaseModel

from loops.python import Agent, LoopWorkflow, score_at_least


class Draft(BaseModel):
    content: str
    score: int


workflow = LoopWorkflow(
    [Agent("writer", "Write about the topic.", provider="demo", output_type=Draft)],
    stop_condition=score_at_least("score", 100),
    max_iterations=MAX,
    gate=GATE,
)
BUDGET
'''


@pytest.fixture
def python_recipe(tmp_path):
    counter = iter(range(1000))

    def make(max_iterations=5, gate=False, budget=""):
        slug = f"py-loop-{next(counter)}"
        path = tmp_path / f"{slug.replace('-', '_')}.py"
        source = (
            PYTHON_LOOP.replace("MAX", str(max_iterations))
            .replace("GATE", str(gate))
            .replace("BUDGET", budget)
        )
        path.write_text(source)
        recipe, _ = create_recipe(
            source, slug=slug, origin=Recipe.Origin.PROJECT, source_path=str(path)
        )
        return recipe

    return make
