"""Where a person sees what starts runs by itself: the recipe page's card, the inbox rows,
the run's header and the API."""

from __future__ import annotations

from django.utils import timezone

from runs import services
from triggers import schedules
from triggers.models import Schedule, ScheduleFiring, Webhook

GATE = """
name: wait for a person
nodes:
  - id: ask
    approval:
      message: Go on?
"""


def scheduled_run(recipe):
    schedule = Schedule.objects.create(recipe=recipe, name="nightly", cron="0 3 * * *")
    run = services.start_run(recipe, schedules.actor(schedule))
    ScheduleFiring.objects.create(schedule=schedule, at=timezone.now(), outcome="started", run=run)
    Schedule.objects.filter(pk=schedule.pk).update(last_fired_at=timezone.now())
    return schedule, run


def test_the_recipe_page_lists_its_schedules_webhooks_and_their_runs(
    client, make_recipe, admin_user
):
    recipe = make_recipe(GATE, slug="gated")
    schedule, run = scheduled_run(recipe)
    webhook = Webhook.objects.create(recipe=recipe, name="pull requests", events=["pull_request"])
    client.force_login(admin_user)
    page = client.get(f"/recipes/{recipe.slug}/").content.decode()
    assert "Schedules and webhooks" in page
    assert "nightly" in page and "cron &#x27;0 3 * * *&#x27; (UTC)" in page
    assert "last fired" in page and "just now" in page and "next" in page
    assert f'href="/runs/{run.pk}/"' in page
    assert f"http://testserver/hooks/{webhook.key}" in page and "events: pull_request" in page
    assert f"/admin/triggers/schedule/{schedule.pk}/change/" in page


def test_a_recipe_without_any_says_how_runs_start(client, make_recipe, viewer):
    recipe = make_recipe(GATE, slug="gated")
    client.force_login(viewer)
    page = client.get(f"/recipes/{recipe.slug}/").content.decode()
    assert "editors set them up" in page
    assert "/admin/triggers/" not in page


def test_the_inbox_run_header_and_api_name_the_schedule(client, make_recipe, viewer):
    recipe = make_recipe(GATE, slug="gated")
    _, run = scheduled_run(recipe)
    client.force_login(viewer)
    assert "by schedule &#x27;nightly&#x27;" in client.get("/").content.decode()
    assert "schedule &#x27;nightly&#x27;" in client.get(f"/runs/{run.pk}/").content.decode()
    assert run.starter == "schedule 'nightly'"
    from runs.serializers import run_summary

    assert run_summary(run)["starter"] == "schedule 'nightly'"
    assert run_summary(run)["started_by"] is None


def test_an_editor_adds_a_schedule_in_the_admin_and_sees_its_firings(
    client, make_recipe, admin_user
):
    recipe = make_recipe(GATE, slug="gated")
    client.force_login(admin_user)
    form = client.get(f"/admin/triggers/schedule/add/?recipe={recipe.pk}").content.decode()
    assert f'<option value="{recipe.pk}" selected>' in form
    added = client.post(
        "/admin/triggers/schedule/add/",
        {
            "recipe": recipe.pk,
            "name": "hourly",
            "enabled": "on",
            "cron": "0 * * * *",
            "timezone": "UTC",
            "inputs": "{}",
            "budget": "{}",
            "concurrency": "queue",
            "firings-TOTAL_FORMS": "0",
            "firings-INITIAL_FORMS": "0",
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    schedule = Schedule.objects.get()
    assert schedule.created_by == admin_user and schedule.periodic_task.crontab.minute == "0"
    run = services.start_run(recipe, schedules.actor(schedule))
    ScheduleFiring.objects.create(schedule=schedule, at=timezone.now(), outcome="started", run=run)
    page = client.get(f"/admin/triggers/schedule/{schedule.pk}/change/").content.decode()
    assert "Latest firings" in page and f'href="/runs/{run.pk}/"' in page
    refused = client.post(
        "/admin/triggers/schedule/add/",
        {
            "recipe": recipe.pk,
            "name": "bad",
            "cron": "* * *",
            "timezone": "UTC",
            "inputs": "{}",
            "budget": "{}",
            "concurrency": "skip",
            "firings-TOTAL_FORMS": "0",
            "firings-INITIAL_FORMS": "0",
        },
    ).content.decode()
    assert "five fields" in refused


def test_beats_own_tables_are_not_in_the_admin(client, admin_user):
    """Edited by hand, a beat entry could send any task with any arguments."""
    client.force_login(admin_user)
    index = client.get("/admin/").content.decode()
    assert "Schedules and webhooks" in index and "Periodic tasks" not in index
    assert client.get("/admin/django_celery_beat/periodictask/").status_code == 404
