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
