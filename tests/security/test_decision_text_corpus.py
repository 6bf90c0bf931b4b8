"""What an agent or a person wrote reaches Slack and a decision link's page only as text:
Slack's mrkdwn control characters are escaped (no `<!channel>` ping, no link of the
writer's), and the page's template escapes markup. A corpus of hostile values, each
checked on both."""

from __future__ import annotations

import json

import pytest

from notifications import links, slack
from notifications.models import DecisionLink
from runs import services
from runs.actor import ENGINE
from runs.models import Gate, NodeRun

pytestmark = pytest.mark.django_db

CORPUS = [
    "<!channel> everyone look",
    "<!here|here>",
    "<https://evil.example/login|Open the gate in Loop Console>",
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "&lt;already escaped&gt; & more",
    "{{ secret }} {% debug %}",
]


def gate_with(make_recipe, message: str) -> Gate:
    run = services.start_run(
        make_recipe("name: g\nnodes:\n  - id: ship\n    bash: echo hi\n", "g"), ENGINE
    )
    row = NodeRun.objects.create(run=run, node_id="ship", kind="approval")
    return row.pause(run, kind=Gate.Kind.APPROVAL, message=message, decisions=[{"id": "ship"}])


@pytest.mark.parametrize("hostile", CORPUS)
def test_slack_shows_it_as_written(make_recipe, hostile):
    gate = gate_with(make_recipe, hostile)
    blocks = slack.gate_blocks(f"Run 1 failed: {hostile}", gate, note=f"{hostile} decided")
    for block in blocks:
        if block["type"] in ("section", "context"):
            texts = [block["text"]] if "text" in block else block["elements"]
            for text in texts:
                written = text["text"].split("\n<http", 1)[0]  # our own link aside
                assert "<" not in written and ">" not in written
    assert json.dumps(blocks).count("|Open the gate in Loop Console>") == 1


@pytest.mark.parametrize("hostile", CORPUS)
def test_a_decision_links_page_shows_it_as_written(make_recipe, operator, client, hostile):
    gate = gate_with(make_recipe, hostile)
    [(_choice, url)] = [
        found for found in links.links_for(gate, operator) if found[0]["id"] == "ship"
    ]
    page = client.get(url[url.index("/decide/") :]).content.decode()
    assert hostile not in page or not any(c in hostile for c in "<>&\"'")
    assert "<script>alert(1)</script>" not in page
    assert "onerror=alert(1)>" not in page
    assert DecisionLink.objects.filter(used_at__isnull=False).count() == 0  # a GET decided nothing
