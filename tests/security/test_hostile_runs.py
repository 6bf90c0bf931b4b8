"""End to end: an operator's hostile message to a bundled recipe (issue 18, item 1), through
the start form, the API and the command line, runs nothing; a Re-run of an old hostile run
runs nothing either, and an old recipe version saved with a refused pattern fails the run
with the reason instead of running the value. The engine runs in this process, with bash."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.test import Client

from recipes.models import RecipeVersion
from runs import services
from runs.actor import Actor
from runs.models import NodeRun, Run
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db(transaction=True)


def hostile(canary) -> str:
    return (
        f'$(touch {canary}) `touch {canary}` "; touch {canary}; " '
        f"'; touch {canary}; ' a[$(touch {canary})]"
    )


def start_by_form(operator, message) -> Run:
    client = Client()
    client.force_login(operator)
    response = client.post("/recipes/counter-loop/start/", {"message": message})
    assert response.status_code == 302, response.content.decode()[:500]
    return Run.objects.latest("pk")


def start_by_api(operator, message) -> Run:
    response = client_for(operator).post(
        "/api/runs", {"recipe": "counter-loop", "message": message}
    )
    assert response.status_code == 201, response.body
    return Run.objects.get(pk=response.body["id"])


def start_by_cli(operator, message) -> Run:
    call_command("run", "start", "counter-loop", "-m", message, "--user", operator.username)
    return Run.objects.latest("pk")


@pytest.mark.parametrize(
    "start", [start_by_form, start_by_api, start_by_cli], ids=["form", "api", "cli"]
)
def test_a_hostile_message_to_counter_loop_runs_nothing(
    bundled,
    operator,
    broker,
    tmp_path,
    start,
):
    canary = tmp_path / "CANARY"
    message = hostile(canary)
    run = start(operator, message)
    broker.deliver(limit=500)
    run.refresh_from_db()
    assert run.status == "completed", run.error
    assert not canary.exists()
    plan = NodeRun.objects.get(run=run, node_id="plan")
    assert plan.output == f"Three steps to do for: {message}"
    report = NodeRun.objects.get(run=run, node_id="report")
    assert report.output.startswith("Finished after the loop said: ")


def test_rerunning_an_old_hostile_run_runs_nothing(bundled, operator, broker, tmp_path):
    canary = tmp_path / "CANARY"
    old = services.start_run(
        bundled["counter-loop"], actor=Actor.operator(operator, "console"), message=hostile(canary)
    )
    broker.deliver(limit=500)
    client = Client()
    client.force_login(operator)
    assert client.post(f"/runs/{old.pk}/rerun/").status_code == 302
    again = Run.objects.exclude(pk=old.pk).latest("pk")
    assert again.rerun_of_id == old.pk and again.message == old.message
    broker.deliver(limit=500)
    again.refresh_from_db()
    assert again.status == "completed", again.error
    assert not canary.exists()


def test_an_old_version_with_a_refused_pattern_fails_the_run_instead(
    make_recipe,
    operator,
    broker,
    tmp_path,
):
    """A version saved before the check (written here around the validator) still cannot
    run a value: the rewrite happens when the step runs."""
    canary = tmp_path / "CANARY"
    recipe = make_recipe('name: old\nnodes:\n  - id: step\n    bash: echo "$USER_MESSAGE"\n', "old")
    unsafe = 'name: old\nnodes:\n  - id: step\n    bash: eval "echo $USER_MESSAGE"\n'
    RecipeVersion.objects.filter(pk=recipe.current_version_id).update(source=unsafe)
    type(recipe).objects.filter(pk=recipe.pk).update(source=unsafe)
    run = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message=f"$(touch {canary})"
    )
    broker.deliver(limit=200)
    run.refresh_from_db()
    assert run.status == "failed"
    said = run.error + " ".join(NodeRun.objects.filter(run=run).values_list("error", flat=True))
    assert "text run as code" in said and "line 4" in said, said
    assert not canary.exists()
