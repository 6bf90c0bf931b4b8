"""The console's view of step machines: the run page's card, the inbox, the review
request page and who may press Merge, staleness."""

import pytest

from loops.stepmachine import handoffs
from loops.stepmachine.machine import MachineState, machine_row
from loops.stepmachine.models import ReviewRequest
from runs import services
from runs.actor import Actor
from runs.executor.sweep import sweep
from runs.models import Run
from tests.stepmachine.conftest import WAITING, git

pytestmark = pytest.mark.django_db


@pytest.fixture
def approved(plane_recipe, operator, repo):
    """An approved run whose review request asks to merge `feature` (one commit) into main."""
    run = services.start_run(
        plane_recipe(WAITING),
        actor=Actor.operator(operator, "console"),
        start=False,
        workdir=str(repo),
    )
    git("checkout", "-q", "feature", cwd=repo)
    (repo / "feature.txt").write_text("new\n")
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "feat: a feature", cwd=repo)
    git("checkout", "-q", "main", cwd=repo)
    Run.objects.filter(pk=run.pk).update(status="completed", phase="approved")
    ReviewRequest.objects.create(
        run=run,
        repository=str(repo),
        branch="feature",
        target_branch="main",
        head_commit=git("rev-parse", "feature", cwd=repo).strip(),
        target_commit=git("rev-parse", "main", cwd=repo).strip(),
        commits=[{"sha": "abc", "subject": "feat: a feature", "author": "t"}],
        diff="+new",
    )
    return run


def test_only_an_operator_sees_and_presses_merge(client, approved, viewer, operator, repo):
    url = f"/runs/{approved.pk}/review/"
    client.force_login(viewer)
    page = client.get(url).content.decode()
    assert "feat: a feature" in page and "data-merge" not in page
    assert "An operator merges this review request." in page
    assert client.post(url + "merge/").status_code == 403
    assert ReviewRequest.objects.get().status == "open"
    client.force_login(operator)
    assert "data-merge" in client.get(url).content.decode()
    done = client.post(url + "merge/", follow=True).content.decode()
    assert "Merged feature into main" in done and "by <strong>otto</strong>" in done
    assert (repo / "feature.txt").exists()  # main is checked out here: its files follow
    request = ReviewRequest.objects.get()
    assert (request.status, request.merged_by_name) == ("merged", "otto")
    event = approved.events.get(kind="review_merged")
    assert event.data["by"] == "otto" and event.data["commit"] == request.merge_commit


def test_merging_needs_a_person_in_the_console(approved, operator):
    from loops.stepmachine import review
    from runs.actor import Actor

    for actor in (Actor("agent"), Actor("engine"), Actor.operator(operator, "api")):
        with pytest.raises(services.NotAllowed, match="A person merges"):
            review.merge(approved.pk, actor)
    assert ReviewRequest.objects.get().status == "open"


def test_the_inbox_and_the_run_page_say_what_the_statuses_mean(client, approved, viewer):
    client.force_login(viewer)
    inbox = client.get("/").content.decode()
    assert "Needs a person" in inbox and "Review and merge" in inbox
    assert 'title="every check passed; ready for a person to merge"' in inbox
    for status in ("observing", "verifying", "completed_unreviewed", "approved", "needs_human"):
        assert f"?status={status}" in inbox  # counted in the inbox
    page = client.get(f"/runs/{approved.pk}/").content.decode()
    assert 'id="step-machine"' in page and "Review request: feature → main" in page
    assert "every check passed; ready for a person to merge" in page


def test_a_run_without_progress_for_stale_after_ms_is_marked_stale(
    plane_recipe, operator, client, viewer
):
    from datetime import timedelta

    from django.utils import timezone

    recipe = plane_recipe(WAITING.replace("roles:", "policy: {stale_after_ms: 60000}\nroles:"))
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"), start=False)
    row = machine_row(run)
    row.status = "running"
    row.save()
    state = MachineState(current="wait")
    state.progressed()
    state.save(row)
    assert sweep()["stale"] == 0  # progress a moment ago: not stale
    state.progress_at = (timezone.now() - timedelta(minutes=2)).isoformat()
    state.save(row)
    assert sweep()["stale"] == 1
    assert MachineState.of(machine_row(run)).stale
    assert run.events.filter(kind="run_stale").count() == 1
    assert sweep()["stale"] == 0  # marked once
    client.force_login(viewer)
    assert "badge-stale" in client.get(f"/runs/{run.pk}/").content.decode()
    handoffs.record_handoff(run.pk, actor=services.Actor("cli"), role="maker", status="completed")
    assert not MachineState.of(machine_row(run)).stale  # progress clears it


def test_a_step_machine_recipes_page_lists_its_roles_and_steps(client, viewer, house_default):
    client.force_login(viewer)
    page = client.get("/recipes/no-mistakes/").content.decode()
    assert "<code>reviewer</code> — review, readonly" in page
    assert '<code>wait_for_review</code> <span class="kind">handoff.wait</span>' in page
    assert "completed → run_tests" in page and "pass → run_document_check" in page
