"""What was reviewed has a digest: a decision made on content that changed since (an
edited artifact, a new commit on a step machine's branch) is refused with 409 saying
what changed, and the same decision on the fresh digest passes. The artifacts folder is
an agent's: a symlink or a FIFO in it is named in the digest, never followed or opened."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.conf import settings

from runs import review, services
from runs.actor import ENGINE, Actor
from runs.errors import StaleReview
from runs.models import Gate
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for
from tests.decisions.test_declared_decisions import THREE_WAYS, branches
from tests.stepmachine.conftest import git, plane_recipe, repo, settled  # noqa: F401

pytestmark = pytest.mark.usefixtures("live_worker")


def artifacts(run) -> Path:
    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts"


def test_a_decision_on_an_edited_artifact_is_refused_then_the_fresh_one_passes(
    make_recipe, operator, client
):
    run = services.start_run(make_recipe(THREE_WAYS, slug="three-ways"), ENGINE, message="v2")
    gate = wait_for(lambda: pending_gate(run), message="the gate")
    (artifacts(run) / "report.md").write_text("what the reviewer read\n")
    api = client_for(operator)
    reviewed = api.get(f"/api/runs/{run.pk}").body["pending_gate"]["digest"]
    assert reviewed != gate.digest  # the report is part of what the gate shows

    (artifacts(run) / "report.md").write_text("edited after the review\n")
    stale = api.post(f"/api/runs/{run.pk}/respond", {"decision": "ship", "digest": reviewed})
    assert stale.status_code == 409
    assert "What you reviewed has changed since (the artifact report.md)" in stale.body["detail"]
    assert pending_gate(run) is not None

    client.force_login(operator)
    url = f"/runs/{run.pk}/gates/{gate.pk}/respond/"
    page = client.post(url, {"decision": "ship", "digest": reviewed}, follow=True)
    assert "the artifact report.md" in page.content.decode()  # the page says what changed
    assert pending_gate(run) is not None

    fresh = api.get(f"/api/runs/{run.pk}").body["pending_gate"]["digest"]
    answered = api.post(f"/api/runs/{run.pk}/respond", {"decision": "ship", "digest": fresh})
    assert answered.status_code == 200, answered.body
    assert branches(run)["shipped"] == "completed"


def test_the_digest_never_follows_a_link_nor_opens_a_fifo(make_recipe, tmp_path):
    run = services.start_run(make_recipe(THREE_WAYS, slug="three-ways"), ENGINE, message="v2")
    gate = wait_for(lambda: pending_gate(run), message="the gate")
    secret = tmp_path / "secret.txt"
    secret.write_text("the console's secret\n")
    (artifacts(run) / "leak").symlink_to(secret)
    os.mkfifo(artifacts(run) / "pipe")  # opening it for reading would block forever
    parts = review.parts_of(run, Gate.objects.get(pk=gate.pk))
    assert set(parts) >= {"the artifact leak", "the artifact pipe"}
    before = parts["the artifact leak"]
    secret.write_text("changed, and never read\n")
    assert review.parts_of(run, gate)["the artifact leak"] == before


HUMAN = """
schema: planeai.loop.recipe.v1
id: reviewed-branch
name: A reviewed branch
steps:
  - id: review
    kind: human.wait
    prompt: Look at the branch.
    decisions:
      - {id: merge, label: Merge, then: complete}
      - {id: rework, label: Rework, then: iterate, text_required: true}
  - id: done
    kind: loop.status
    status: approved
"""


def test_a_new_commit_on_the_branch_makes_a_step_machine_decision_stale(
    plane_recipe,  # noqa: F811
    repo,  # noqa: F811
    operator,
):
    me = Actor.operator(operator, "console")
    run = services.start_run(plane_recipe(HUMAN), actor=me, workdir=str(repo))
    settled(run, "paused")
    gate = Gate.objects.get(run=run, status="pending")
    assert "the branch feature" in gate.digest_parts
    (repo / "more.txt").write_text("a commit after the review\n")
    git("checkout", "-q", "feature", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "later", cwd=repo)
    with pytest.raises(StaleReview) as refused:
        services.respond(gate.pk, me, "merge", digest=gate.digest)
    assert refused.value.changed == ["the branch feature"]
    services.respond(gate.pk, me, "merge", digest=review.current_digest(gate))
    settled(run, "approved")
    gate.refresh_from_db()
    assert gate.result["decision"] == "merge" and gate.status == "accepted"
