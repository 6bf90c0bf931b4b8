"""Every body step of every loop_group iteration is kept with its prompt and usage, listed
by the API and shown on the run page (not only the latest iterations)."""

from decimal import Decimal

from django.test import Client

from console.models import ApiToken
from loops.workflow.group import body_usage
from runs import services
from runs.actor import ENGINE
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


def test_a_group_iteration_carries_the_usage_of_its_body_steps():
    rows = [
        NodeRun(state={"tokens_in": 100, "tokens_out": 20, "cost_usd": "0.0100"}),
        NodeRun(state={"tokens_in": 50, "tokens_out": 5, "cost_usd": None}),
        NodeRun(state={"script": "echo"}),  # a bash step reports nothing
    ]
    assert body_usage(rows) == {
        "tokens_in": 150,
        "tokens_out": 25,
        "cost_usd": Decimal("0.0100"),
    }
    assert body_usage([NodeRun(state={})]) == dict.fromkeys(
        ("tokens_in", "tokens_out", "cost_usd"), None
    )
    assert Iteration._meta.get_field("cost_usd").decimal_places == 6
