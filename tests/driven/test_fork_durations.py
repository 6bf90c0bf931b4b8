"""A fork of a driven run made minutes after the original: its Nodes card times each agent's
work in the fork from the fork's own calls, not from the original's start (issue 41)."""

from __future__ import annotations

import re
from datetime import timedelta

from django.db.models import F
from django.test import Client
from django.urls import reverse

from runs.models import Iteration, NodeRun, Run
from tests.api.conftest import client_for
from tests.conftest import wait_run
from tests.driven.conftest import driven_recipe
from tests.driven.test_fork import FEEDBACK, HOST

EARLIER = timedelta(minutes=5)


def node_line(card: str, node_id: str) -> str:
    return card.split(f'<code class="node-id">{node_id}</code>', 1)[1].split("</div>", 1)[0]


def test_a_forks_nodes_card_times_its_own_work(live_worker, start_driven, operator):
    original = wait_run(start_driven(driven_recipe("host-agent", providers=HOST)))
    assert original.status == "completed", original.error
    # The original ran five minutes before the fork.
    Run.objects.filter(pk=original.pk).update(
        created_at=F("created_at") - EARLIER,
        started_at=F("started_at") - EARLIER,
        finished_at=F("finished_at") - EARLIER,
    )
    for model in (NodeRun, Iteration):
        model.objects.filter(run=original).update(
            started_at=F("started_at") - EARLIER, finished_at=F("finished_at") - EARLIER
        )
    answer = client_for(operator).post(
        f"/api/runs/{original.pk}/fork", {"node": "drafter", "iteration": 1, "feedback": FEEDBACK}
    )
    assert answer.status_code == 201, answer.body
    fork = wait_run(Run.objects.get(pk=answer.body["id"]), "completed", "failed", "cancelled")
    assert fork.status == "completed", fork.error

    browser = Client()
    browser.force_login(operator)
    card = browser.get(reverse("run_part", args=[fork.pk, "nodes"])).content.decode()
    for agent in ("researcher", "drafter", "host"):
        line = node_line(card, agent)
        assert re.search(r'<span class="muted">[\d.]+ (ms|s)</span>', line), (agent, line)
