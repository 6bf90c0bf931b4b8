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
    # Every phase is counted; the inbox shows a chip for those some run is in.
    from runs.inbox import capped_status_counts

    counted = dict(capped_status_counts())
    for status in ("observing", "verifying", "completed_unreviewed", "approved", "needs_human"):
        assert status in counted
    assert counted["approved"] == "1" and "?status=approved" in inbox
    assert "?status=observing" not in inbox  # no run observes: no chip
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


NOTHING_NEW = """
schema: planeai.loop.recipe.v1
id: nothing-new
name: Nothing new
inputs:
  branch: {type: branch, required: true}
roles:
  maker: {provider: demo, mode: write, isolation: project}
steps:
  - {id: done, kind: loop.status, status: approved}
"""


@pytest.fixture
def nothing_new(plane_recipe, operator, repo, offline_broker, django_capture_on_commit_callbacks):
    """A run that ends approved on `feature`, which has no commit main lacks."""
    with django_capture_on_commit_callbacks(execute=True):
        run = services.start_run(
            plane_recipe(NOTHING_NEW),
            actor=Actor.operator(operator, "console"),
            inputs={"branch": "feature"},
            workdir=str(repo),
        )
    while offline_broker.sent:  # as a worker would, each task's messages sent as it commits
        with django_capture_on_commit_callbacks(execute=True):
            offline_broker.run_all()
    run.refresh_from_db()
    return run


def test_a_branch_with_no_commits_is_nothing_to_merge_and_waits_for_nobody(
    nothing_new, client, operator, capsys
):
    from loops.stepmachine import review
    from runs.inbox import needs_a_person

    run = nothing_new
    assert (run.status, run.phase) == ("completed", "nothing_to_merge")
    request = ReviewRequest.objects.get(run=run)
    assert (request.status, request.commits) == ("nothing_to_merge", [])
    assert run.events.filter(kind="review_nothing_to_merge").exists()
    assert run not in needs_a_person()
    client.force_login(operator)
    page = client.get(f"/runs/{run.pk}/review/").content.decode()
    assert "Nothing to merge: <code>feature</code> has no commit" in page
    assert "data-merge" not in page and "Merging puts" not in page
    assert "no remote: nothing was pushed" not in page
    inbox = client.get("/").content.decode()
    assert "Review and merge" not in inbox and "ready for a person to merge" not in inbox
    with pytest.raises(services.Conflict, match="Nothing to merge"):
        review.merge(run.pk, Actor.operator(operator, "console"))
    assert client.post(f"/runs/{run.pk}/review/merge/").status_code == 302


def test_a_branch_the_target_took_in_meanwhile_is_nothing_to_merge_on_merge(
    approved, client, operator, repo
):
    """Merged by hand before a person pressed Merge: recorded so, not refused forever."""
    git("merge", "-q", "feature", cwd=repo)
    client.force_login(operator)
    done = client.post(f"/runs/{approved.pk}/review/merge/", follow=True).content.decode()
    assert "Nothing to merge: main already contains feature" in done
    assert ReviewRequest.objects.get().status == "nothing_to_merge"
    approved.refresh_from_db()
    assert approved.phase == "nothing_to_merge"
