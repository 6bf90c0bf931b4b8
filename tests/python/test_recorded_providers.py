"""Python loops from a script, recorded in the console, on providers other than the demo:
an OpenAI-compatible provider configured in the admin that fills a pydantic output type,
and a ParallelWorkflow whose stages really run at the same time under the recording host
(the path a worker or a script takes)."""

from __future__ import annotations

import json
import sys

import pytest

from runs.models import Iteration, ProviderConfig, Run
from tests.providers import conftest as providers
from tests.python.scripted import run_async
from tests.python.test_gates import import_file

# The provider tests' fake OpenAI-compatible server, and its key on the allow-list.
fake_ai_server = providers.fake_ai_server
fake_ai = providers.fake_ai
test_key_env_allowed = providers.test_key_env_allowed

pytestmark = pytest.mark.django_db(transaction=True)

REVIEWER = '''"""Reviewed by an OpenAI-compatible provider"""
from pydantic import BaseModel

from loops.python import Agent


class Review(BaseModel):
    content: str
    score: int
    feedback: str


workflow = Agent(
    "reviewer", "Review the copy and score it 0-100.", provider="house-ai", output_type=Review
)
'''

PARALLEL = '''"""Two analyses at once"""
import threading

from loops.python import Agent, ParallelWorkflow
from tests.python.scripted import ScriptedProvider

both_running = threading.Barrier(2, timeout=60)


def answer(request, count):
    both_running.wait()  # only returns once the other stage is in its call too
    return f"{request.node_id} done"


provider = ScriptedProvider(answer)
workflow = ParallelWorkflow(
    [Agent("market", "M.", provider=provider), Agent("tech", "T.", provider=provider)],
    name="analysis",
)
'''


@pytest.fixture
def script(tmp_path):
    """Import a workflow file as a script would; forget the module afterwards."""
    names = []

    def load(name: str, source: str):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        names.append(name)
        return import_file(path, name)

    yield load
    for name in names:
        sys.modules.pop(name, None)


def test_an_agent_on_an_admin_configured_openai_provider_fills_its_output_type(script, fake_ai):
    ProviderConfig.objects.create(
        name="house-ai",
        kind="openai",
        base_url=f"{fake_ai.url}/v1",
        model="fake-model",
        api_key_env="FAKE_PROVIDER_KEY",
    )
    answer = {"content": "Buy the widget.", "score": 91, "feedback": "Sharp."}
    fake_ai.answers = [json.dumps(answer)]
    module = script("house_reviewer", REVIEWER)

    result = run_async(module.workflow.run("Write marketing copy"))

    assert isinstance(result.output, module.Review)
    assert result.output.score == 91 and result.output.content == "Buy the widget."
    (request,) = fake_ai.requests
    assert request["body"]["model"] == "fake-model"
    assert request["body"]["response_format"]["type"] == "json_schema"
    run = Run.objects.get()
    assert run.status == "completed" and run.recipe.kind == "python"
    it = Iteration.objects.get(run=run, node_id="reviewer")
    assert it.status == "completed"
    assert "Review the copy and score it 0-100." in it.prompt
    assert "Write marketing copy" in it.prompt
    assert json.loads(it.output) == answer and it.structured == answer
    assert it.tokens_in > 0 and it.tokens_out > 0
    assert it.node_run.state["provider"] == "house-ai"


def test_a_recorded_parallel_workflow_runs_its_stages_concurrently(script):
    module = script("two_analyses", PARALLEL)

    result = run_async(module.workflow.run("A launch post"))

    assert result.output == {"market": "market done", "tech": "tech done"}
    run = Run.objects.get()
    assert run.status == "completed"
    market, tech = Iteration.objects.filter(run=run).order_by("node_id")
    assert (market.node_id, tech.node_id) == ("market", "tech")
    assert market.status == tech.status == "completed"
    # Each call was under way before the other finished: the console shows them overlap.
    assert market.started_at < tech.finished_at and tech.started_at < market.finished_at
