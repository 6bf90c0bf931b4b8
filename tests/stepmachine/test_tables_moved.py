"""The step machine's tables moved from the kernel app to its own (issue 24) with their rows:
a database of the last release (`runs` up to 0014, no `planeai` migration) holding a step
machine's handoffs and review request is migrated forward, and its run keeps them, shows
them on its page and in the admin, and forks. Through a real worker (the run is made by
its turns), on whichever database the suite runs."""

from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from loops.stepmachine.models import Handoff, ReviewRequest
from runs import services
from runs.actor import Actor
from tests.stepmachine.conftest import settled

# The last release's state: the kernel's migrations up to its snapshot, the step machine's
# app not migrated at all.
LAST_RELEASE = [("runs", "0014_run_snapshot"), ("planeai", None)]

MADE_TWICE = """
schema: planeai.loop.recipe.v1
id: made-twice
name: Made, then made again
roles:
  maker: {provider: scripted, mode: write, isolation: project}
steps:
  - id: make
    kind: session.create
    role: maker
    prompt: |
      Make it.
      @handoff 1: completed: made the first draft
  - {id: wait_make, kind: handoff.wait, from: maker, on: {completed: again}}
  - id: again
    kind: session.prompt
    role: maker
    select: latest
    prompt: |
      Again after: {{ runtime.last_error }}
      @handoff *: completed: made it again
  - {id: wait_again, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def migrate_to(targets):
    """Migrate to `targets`; the historical models of every migration then applied."""
    MigrationExecutor(connection).migrate(targets)
    loader = MigrationExecutor(connection).loader  # a fresh one reads what is applied now
    return loader.project_state(list(loader.applied_migrations)).apps


def migrate_to_the_latest() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


def tables() -> set[str]:
    with connection.cursor() as cursor:
        return set(connection.introspection.table_names(cursor))


def test_a_step_machine_made_by_the_last_release_keeps_its_rows_shows_them_and_forks(
    live_worker, scripted, plane_recipe, operator, admin_user, client
):
    run = settled(
        services.start_run(
            plane_recipe(MADE_TWICE), Actor.operator(operator, "console"), message="m"
        ),
        "approved",
    )
    handoff_type = ContentType.objects.get_for_model(Handoff).pk

    old = migrate_to(LAST_RELEASE)
    try:
        # The last release's tables, in the kernel app, with the turns' handoffs.
        assert {"runs_handoff", "runs_reviewrequest"} <= tables()
        assert not {"planeai_handoff", "planeai_reviewrequest"} & tables()
        OldHandoff = old.get_model("runs", "Handoff")
        OldReviewRequest = old.get_model("runs", "ReviewRequest")
        OldContentType = old.get_model("contenttypes", "ContentType")
        assert OldHandoff.objects.filter(run_id=run.pk).count() == 2
        assert OldContentType.objects.get(app_label="runs", model="handoff").pk == handoff_type
        # What the last release recorded besides: a person's handoff and a review request.
        by_hand = OldHandoff.objects.create(
            run_id=run.pk,
            role="maker",
            status="completed",
            summary="recorded by the last release",
            content={"schema": "planeai.handoff.v1", "status": "completed"},
            seq=run.last_seq,
            recorded_by_name="otto",
            surface="cli",
        )
        review = OldReviewRequest.objects.create(
            run_id=run.pk,
            repository="/srv/repo",
            branch="feature",
            target_branch="main",
            head_commit="a" * 40,
            target_commit="b" * 40,
            commits=[{"sha": "a" * 40, "subject": "feat: made twice", "author": "t"}],
            diff="+made\n",
        )
    finally:
        migrate_to_the_latest()

    # Moved: the step machine's own tables, the same rows and ids, the same content type.
    assert {"planeai_handoff", "planeai_reviewrequest"} <= tables()
    assert not {"runs_handoff", "runs_reviewrequest"} & tables()
    kept = Handoff.objects.get(pk=by_hand.pk)
    assert (kept.run_id, kept.summary, kept.surface) == (
        run.pk,
        "recorded by the last release",
        "cli",
    )
    assert kept.accepted_form
    assert [h.summary for h in Handoff.objects.filter(run=run).order_by("pk")] == [
        "made the first draft",
        "made it again",
        "recorded by the last release",
    ]
    assert ReviewRequest.objects.get(run=run).pk == review.pk and run.review.branch == "feature"
    assert ContentType.objects.get(app_label="planeai", model="handoff").pk == handoff_type
    # New rows go on after the old ones (the id sequence came along with the table).
    after = Handoff.objects.create(
        run=run, role="maker", status="completed", content={}, seq=run.last_seq, surface="cli"
    )
    assert after.pk > by_hand.pk

    # Visible: its page shows the handoffs and the review request, so does the admin.
    client.force_login(admin_user)
    page = client.get(run.get_absolute_url())
    assert page.status_code == 200
    text = page.content.decode()
    assert "recorded by the last release" in text and "made the first draft" in text
    assert "Review request: feature → main" in text
    assert client.get(f"/runs/{run.pk}/review/").status_code == 200
    listed = client.get("/admin/planeai/handoff/")
    assert listed.status_code == 200 and "4 handoffs" in listed.content.decode()
    assert client.get("/admin/planeai/reviewrequest/").status_code == 200

    # Forkable: from the maker's second turn, the fork goes on to its own approval.
    fork = services.fork_run(
        run, Actor.operator(operator, "console"), node="maker", iteration=2, feedback="once more"
    )
    settled(fork, "approved")
    assert fork.forked_from_id == run.pk
    assert Handoff.objects.filter(run=fork).exists()
    assert Handoff.objects.filter(run=run).count() == 4  # the original's are untouched
