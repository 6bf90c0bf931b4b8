"""What one run page renders is bounded: a page of nodes at a time (as iterations are
paged), and the end of each node's output. A 300-node recipe with long outputs used to
render a page of over a hundred megabytes."""

import pytest
from django.urls import reverse

from runs.models import NodeRun
from runs.queries import NODE_OUTPUT_SHOWN, NODES_PAGE
from tests.console.conftest import login

pytestmark = pytest.mark.django_db

OUTPUT_CHARS = 100_000


@pytest.fixture
def huge_run(guided_run):
    run, first = guided_run
    first.delete()
    NodeRun.objects.bulk_create(
        NodeRun(
            run=run,
            node_id=f"step-{number:03d}",
            kind="bash",
            status="succeeded",
            output=f"start of step {number}\n" + "x" * OUTPUT_CHARS + f"\nend of step {number}",
        )
        for number in range(300)
    )
    return run


def test_a_300_node_run_page_shows_one_page_of_node_tails(client, viewer, huge_run):
    client = login(client, viewer)
    response = client.get(reverse("run_detail", args=[huge_run.pk]))
    assert response.status_code == 200
    body = response.content.decode()
    assert len(body) < NODES_PAGE * NODE_OUTPUT_SHOWN * 1.2  # was 300 × 100 KB
    assert "step-000" in body and f"step-{NODES_PAGE - 1:03d}" in body
    assert f"step-{NODES_PAGE:03d}" not in body
    # The end of each output is what is shown, and the page says it is cut.
    assert "end of step 0" in body and "start of step 0" not in body
    assert f"Showing the last {NODE_OUTPUT_SHOWN} of" in body

    # The next page continues where this one stopped, and the last says there is no more.
    seen = body.count('class="node"')
    url = body.split("?nodes_after=", 1)[1].split('"', 1)[0]
    while True:
        page = client.get(reverse("run_detail", args=[huge_run.pk]) + f"?nodes_after={url}")
        text = page.content.decode()
        assert "First nodes" in text
        seen += text.count('class="node"')
        if "?nodes_after=" not in text.split('id="run-nodes"', 1)[1].split("</section>", 1)[0]:
            break
        url = text.split("?nodes_after=", 1)[1].split('"', 1)[0]
    assert seen == 300 and "step-299" in text


def test_the_nodes_part_refreshes_the_page_being_read(client, viewer, huge_run):
    client = login(client, viewer)
    after = NodeRun.objects.filter(run=huge_run).order_by("id")[NODES_PAGE - 1].pk
    part = client.get(
        reverse("run_part", args=[huge_run.pk, "nodes"]) + f"?after={after}",
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert f"step-{NODES_PAGE:03d}" in part and "step-000" not in part
    page = client.get(reverse("run_detail", args=[huge_run.pk]) + f"?nodes_after={after}")
    assert f"?after={after}" in page.content.decode()


def test_a_long_loop_group_says_where_its_earlier_iterations_are(client, viewer, guided_run):
    from runs.queries import GROUP_ITERATIONS_SHOWN

    run, _ = guided_run
    total = GROUP_ITERATIONS_SHOWN + 3
    NodeRun.objects.create(
        run=run, node_id="loop", kind="loop_group", status="completed", iteration_count=total
    )
    NodeRun.objects.bulk_create(
        NodeRun(
            run=run,
            node_id=f"loop.{step}",
            kind="prompt",
            status="succeeded",
            iteration=number,
            output=f"{step} of iteration {number}",
        )
        for number in range(1, total + 1)
        for step in ("write", "review")
    )
    client = login(client, viewer)
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert f"Iteration {total}<" in page and "Iteration 4<" in page
    assert "Iteration 3<" not in page
    steps_url = f"/api/runs/{run.pk}/steps"
    assert (
        f'3 earlier iterations are not shown — see them in the API: <a href="{steps_url}">' in page
    )
    # The link works for the person reading the page, and starts with what was left out.
    steps = client.get(steps_url).json()["items"]
    body = [(s["node"], s["group_iteration"]) for s in steps if s["group_iteration"]]
    assert body[:2] == [
        ("loop.write", 1),
        ("loop.review", 1),
    ]


def test_a_loop_group_with_every_iteration_shown_says_nothing_is_left_out(
    client, viewer, guided_run
):
    run, _ = guided_run
    NodeRun.objects.create(
        run=run, node_id="loop", kind="loop_group", status="completed", iteration_count=2
    )
    NodeRun.objects.bulk_create(
        NodeRun(run=run, node_id="loop.write", kind="prompt", status="succeeded", iteration=n)
        for n in (1, 2)
    )
    page = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert "Iteration 2<" in page and "Iteration 1<" in page
    assert "earlier iteration" not in page
