import json
from pathlib import Path

import pytest
from django.conf import settings

AGENT = Path(__file__).with_name("scripted_agent.py")

PROVIDERS = f"""
providers:
  scripted:
    kind: command
    command: "python3 {AGENT}"
provider: scripted
"""


@pytest.fixture
def make_scripted_recipe(make_recipe):
    """Make a recipe from YAML whose default provider is the scripted agent: `body` after
    the name (and `interactive: true` if asked), `head` for more top-level fields."""
    counter = iter(range(1000))

    def make(body: str, interactive: bool = False, head: str = ""):
        top = "name: t\n" + ("interactive: true\n" if interactive else "") + head + PROVIDERS
        return make_recipe(top + body, slug=f"t{next(counter)}")

    return make


def calls(run) -> list[dict]:
    path = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts" / "calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def node(run, node_id):
    return run.nodes.get(node_id=node_id, iteration=0)


def iterations(run, node_id):
    return list(run.iterations.filter(node_id=node_id).order_by("generation", "number"))
