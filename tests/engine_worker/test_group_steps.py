"""Every body step of every loop_group iteration is kept with its prompt and usage (its
agent call, an iteration of its row), listed by the API and shown on the run page (not
only the latest iterations)."""

from django.test import Client

from console.models import ApiToken
from runs import services
from runs.actor import ENGINE
from runs.budget import usage_totals
from runs.chart import run_chart
from runs.models import Iteration, NodeRun
from tests.conftest import wait_run

BODY = """
nodes:
  - id: fix
    loop_group:
      until_bash: test $test.output = "green"
      max_iterations: 6
      nodes:
        - id: implement
          prompt: "prev-test=[$LOOP_PREV.test.output]\\n@*: patched"
        - id: test
          depends_on: [implement]
          bash: |
            echo x >> attempts
            if [ $(wc -l < attempts) -ge 5 ]; then printf green; else printf red; fi
"""


def test_every_iteration_body_step_is_listed_and_shown(live_worker, make_scripted_recipe, viewer):
    run = services.start_run(make_scripted_recipe(BODY), actor=ENGINE, message="m")
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    _, secret = ApiToken.issue(viewer, name="t")
    api = Client(headers={"Authorization": f"Bearer {secret}"})
    steps = api.get(f"/api/runs/{run.pk}/steps", {"node": "fix.implement"}).json()["items"]
    assert [s["group_iteration"] for s in steps] == [1, 2, 3, 4, 5]
    assert all(s["prompt"].startswith("prev-test=[") for s in steps)
    assert steps[1]["prompt"].startswith("prev-test=[red]")  # the check reached the writer
    assert all(s["kind"] == "prompt" and "tokens_in" in s and "cost_usd" in s for s in steps)

    page_client = Client()
    page_client.force_login(viewer)
    page = page_client.get(f"/runs/{run.pk}/").content.decode()
    for number in range(1, 6):
        assert f"Iteration {number}</summary>" in page
    assert page.count("Prompt as sent") >= 5


def test_unknown_step_filter_is_refused(live_worker, make_scripted_recipe, viewer):
    run = services.start_run(make_scripted_recipe(BODY), actor=ENGINE, message="m")
    _, secret = ApiToken.issue(viewer, name="t")
    api = Client(headers={"Authorization": f"Bearer {secret}"})
    response = api.get(f"/api/runs/{run.pk}/steps", {"nod": "x"})
    assert response.status_code == 422 and "nod" in response.json()["detail"]


def test_every_agent_call_is_one_iteration_and_counted_once(live_worker, bundled, settings):
    """A body step's call is an iteration of its own row (one per step and group
    iteration); the group's iteration carries no usage of its own, so the run's totals,
    the API's steps and the chart count each call once."""
    settings.LOOP_DEMO_DELAY = 0
    run = wait_run(
        services.start_run(bundled["writer-reviewer"], actor=ENGINE, message="copy"),
        "completed",
        "failed",
    )
    assert run.status == "completed", run.error
    calls = Iteration.objects.filter(run=run, node_run__kind="prompt")
    body_rows = NodeRun.objects.filter(run=run, kind="prompt")
    assert calls.count() == body_rows.count() > 0
    # numbered after the group's round the step ran in
    assert all(row.iterations.get().number == row.iteration for row in body_rows)
    assert all(call.prompt and call.tokens_in for call in calls)
    assert all("tokens_in" not in row.state for row in body_rows)
    groups = Iteration.objects.filter(run=run, node_run__kind="loop_group")
    assert not groups.exclude(tokens_in=None).exists()  # counted on the calls, not again here

    spent = sum(c.tokens_in + c.tokens_out for c in calls)
    totals = usage_totals([run.pk])[run.pk]
    assert totals["tokens_in"] + totals["tokens_out"] == spent
    assert totals["iterations"] == groups.count()  # the limit counts loops' iterations
    (series,) = run_chart(run)
    assert series.node_id == "draft-loop"
    per_group = {p.number: p.values["tokens"] for p in series.points}
    for number, tokens in per_group.items():
        in_body = calls.filter(node_run__iteration=number)
        assert tokens == sum(c.tokens_in + c.tokens_out for c in in_body)
