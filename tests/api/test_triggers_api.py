"""Schedules and webhooks over the API: viewers read, editors set up; the admin's rules."""

from __future__ import annotations

from django_celery_beat.models import PeriodicTask

from triggers.models import Schedule, Webhook

QUICK = """
name: quick
nodes:
  - id: say
    bash: echo hello
"""


def test_an_editor_sets_up_a_schedule_and_beat_learns_of_it(make_recipe, as_editor, as_viewer):
    make_recipe(QUICK, slug="quick")
    made = as_editor.post(
        "/api/schedules",
        {"recipe": "quick", "name": "nightly", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
    )
    assert made.status_code == 201, made.body
    assert made.body["next_firing_at"] and made.body["concurrency"] == "skip"
    schedule = Schedule.objects.get(pk=made.body["id"])
    entry = PeriodicTask.objects.get(pk=schedule.periodic_task_id)
    assert (entry.crontab.hour, str(entry.crontab.timezone)) == ("3", "Europe/Paris")
    assert as_viewer.get("/api/schedules").body[0]["name"] == "nightly"

    paused = as_editor.call("patch", f"/api/schedules/{schedule.pk}", {"enabled": False})
    assert paused.status_code == 200 and paused.body["next_firing_at"] is None
    assert not PeriodicTask.objects.get(pk=schedule.periodic_task_id).enabled

    gone = as_editor.call("delete", f"/api/schedules/{schedule.pk}")
    assert gone.status_code == 204
    assert not PeriodicTask.objects.filter(pk=schedule.periodic_task_id).exists()


def test_a_schedule_the_admin_would_refuse_is_refused_with_its_words(make_recipe, as_editor):
    make_recipe(QUICK, slug="quick")
    refused = as_editor.post(
        "/api/schedules", {"recipe": "quick", "name": "bad", "cron": "61 * * * *"}
    )
    assert refused.status_code == 422
    assert "Not a cron expression" in refused.body["errors"]["cron"]
    assert not Schedule.objects.exists()


def test_viewers_and_operators_cannot_set_up_what_starts_runs(make_recipe, as_viewer, as_operator):
    make_recipe(QUICK, slug="quick")
    body = {"recipe": "quick", "name": "n", "every_seconds": 60}
    assert as_viewer.post("/api/schedules", body).status_code == 403
    assert as_operator.post("/api/schedules", body).status_code == 403
    assert as_operator.post("/api/webhooks", {"recipe": "quick", "name": "n"}).status_code == 403


def test_a_webhooks_secret_is_shown_when_it_is_made_only(make_recipe, as_editor, as_viewer):
    make_recipe(QUICK, slug="quick")
    made = as_editor.post("/api/webhooks", {"recipe": "quick", "name": "pushes"})
    assert made.status_code == 201
    webhook = Webhook.objects.get(pk=made.body["id"])
    assert made.body["secret"] == webhook.secret
    assert made.body["path"] == f"/hooks/{webhook.key}"
    assert as_viewer.get(f"/api/webhooks/{webhook.pk}").body["secret"] is None
    renewed = as_editor.call("patch", f"/api/webhooks/{webhook.pk}", {"new_secret": True})
    webhook.refresh_from_db()
    assert renewed.body["secret"] == webhook.secret != made.body["secret"]
