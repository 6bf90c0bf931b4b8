"""A step machine's words are its phases (issue 35): its run's status is the kernel's
(running, paused, completed) and its own word is `Run.phase`, which every surface shows as
the run's status: the run page, the runs list and its filter, the API (`status` as before,
and `phase`), the inbox, the command line and the metrics. The migration maps the rows of
the statuses a step machine once set, forward and back."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from loops.stepmachine import review
from loops.stepmachine.machine import PHASES
from runs import kinds
from runs.actor import Actor
from runs.models import Run
from tests.api.conftest import client_for
from tests.console.test_metrics import scrape, value
from tests.stepmachine.test_pages import approved  # noqa: F401 (a fixture)

BEFORE = ("runs", "0015_step_machine_tables_to_planeai")
AFTER = ("runs", "0016_run_phase")


def moved(run: Run, status: str, phase: str = "", error: str | None = None) -> Run:
    """The run moved as its kind moves it (Run.set_status, with the run's lock)."""
    with transaction.atomic():
        run = Run.objects.select_for_update().select_related("recipe").get(pk=run.pk)
        run.set_status(status, phase=phase, error=error)
    return run


def test_the_kind_names_its_phases_and_the_kernel_reads_them(waiting_run):
    assert kinds.of_run(waiting_run).phases == PHASES
    assert set(PHASES) <= set(Run.status_words())
    assert not set(PHASES) & set(Run.Status.values)  # none of its words is the kernel's
    run = moved(waiting_run, "running", "verifying")
    assert (run.status, run.phase, run.status_word) == ("running", "verifying", "verifying")
    assert run.status_meaning == PHASES["verifying"] == Run.meaning_of("verifying")
    (event,) = run.events.filter(kind="run_verifying")
    assert (event.data["status"], event.data["previous"]) == ("running", "pending")
    run = moved(run, "cancelled", error="stopped")  # a kernel move leaves the phase behind
    assert (run.status, run.phase, run.status_word) == ("cancelled", "", "cancelled")


def test_a_step_machine_run_shows_its_phase_everywhere(waiting_run, client, viewer, admin_user):
    run = moved(waiting_run, "running", "verifying")
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'class="badge badge-verifying">verifying</span>' in page
    assert PHASES["verifying"] in page
    listed = client.get("/runs/?status=verifying").content.decode()
    assert f"Run {run.pk}</a>" in listed and "badge-verifying" in listed
    assert f"Run {run.pk}</a>" not in client.get("/runs/?status=running").content.decode()
    inbox = client.get("/?part=live").content.decode()
    assert f'title="{PHASES["verifying"]}" class="badge badge-verifying">verifying' in inbox
    assert 'href="/runs/?status=verifying"' in inbox

    api = client_for(viewer)
    one = api.get(f"/api/runs/{run.pk}").body
    assert (one["status"], one["phase"]) == ("verifying", "verifying")
    assert [r["id"] for r in api.get("/api/runs", status="verifying").body["items"]] == [run.pk]
    assert api.get("/api/runs", status="running").body["items"] == []
    assert api.get("/api/runs", status="sleeping").status_code == 422
    assert api.get(f"/api/runs/{run.pk}/events").body["run_status"] == "verifying"

    out = StringIO()
    call_command("run", "status", str(run.pk), stdout=out)
    assert out.getvalue().startswith(f"run {run.pk}: verifying")
    client.force_login(admin_user)
    families = scrape(client)
    assert value(families, "loop_runs", status="verifying") == 1
    assert value(families, "loop_runs", status="running") == 0


def test_a_blocked_run_is_paused_for_a_person_and_the_inbox_lists_it(waiting_run, client, viewer):
    run = moved(waiting_run, "paused", "blocked", error="max_rounds (3) reached")
    client.force_login(viewer)
    inbox = client.get("/").content.decode()
    assert "Needs a person" in inbox and f"Run {run.pk}</a>" in inbox
    assert PHASES["blocked"] in inbox
    assert client_for(viewer).get(f"/api/runs/{run.pk}").body["status"] == "blocked"


def test_merging_ends_an_approved_run_merged_its_status_completed(approved, operator):  # noqa: F811
    ended = timezone.now() - timedelta(minutes=5)
    Run.objects.filter(pk=approved.pk).update(finished_at=ended)
    review.merge(approved.pk, Actor.operator(operator, "console"))
    approved.refresh_from_db()
    assert (approved.status, approved.phase) == ("completed", "merged")
    assert approved.finished_at == ended  # the run's own end is kept
    (event,) = approved.events.filter(kind="run_merged")
    assert (event.data["previous"], event.data["status"], event.data["by"]) == (
        "approved",
        "completed",
        "otto",
    )


# --- the migration -------------------------------------------------------------------------

OLD = ["observing", "verifying", "blocked", "needs_human", "completed_unreviewed", "approved"]
OLD += ["merged", "pending", "running", "paused", "completed", "failed", "cancelled"]
MAPPED = {
    "observing": ("running", "observing"),
    "verifying": ("running", "verifying"),
    "blocked": ("paused", "blocked"),
    "needs_human": ("paused", "needs_human"),
    "completed_unreviewed": ("completed", "completed_unreviewed"),
    "approved": ("completed", "approved"),
    "merged": ("completed", "merged"),
}


def migrate_to(target):
    MigrationExecutor(connection).migrate([target])
    loader = MigrationExecutor(connection).loader  # a fresh one reads what is applied now
    return loader.project_state(list(loader.applied_migrations)).apps


@pytest.mark.django_db(transaction=True)
def test_the_migration_maps_each_status_to_a_kernel_status_and_a_phase_and_back(waiting_run):
    version = (waiting_run.recipe_id, waiting_run.recipe_version_id)
    old = migrate_to(BEFORE)
    try:
        OldRun, OldEvent = old.get_model("runs", "Run"), old.get_model("runs", "RunEvent")
        ids = {}
        for status in OLD:
            ids[status] = OldRun.objects.create(
                recipe_id=version[0], recipe_version_id=version[1], status=status
            ).pk
        OldEvent.objects.create(run_id=ids["approved"], seq=1, kind="run_approved", data={})
        new = migrate_to(AFTER)
        NewRun, NewEvent = new.get_model("runs", "Run"), new.get_model("runs", "RunEvent")
        for status, pk in ids.items():
            row = NewRun.objects.get(pk=pk)
            assert (row.status, row.phase) == MAPPED.get(status, (status, "")), status
        told = NewEvent.objects.get(run_id=ids["approved"], kind="run_approved")
        assert told.data == {"status": "completed"}  # runs.ag_ui reads the kernel's status
        old = migrate_to(BEFORE)
        OldRun = old.get_model("runs", "Run")
        assert {s: OldRun.objects.get(pk=pk).status for s, pk in ids.items()} == {s: s for s in OLD}
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
