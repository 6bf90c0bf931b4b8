"""The run page, the event log, the Resume button and `manage.py loop` ask the run's kind
(runs.kinds) for what they show of it: a kind registered here for the workflow runs of these
tests gets its panel, its words, its sentences and its subcommand without a line of runs/."""

from io import StringIO
from types import ModuleType

import pytest
from django.core.management import call_command
from django.db import transaction
from django.urls import reverse

from runs import kinds
from runs.kinds import RunPart
from runs.models import Run

from .conftest import add_iteration, login

pytestmark = pytest.mark.django_db


def _hello_command() -> ModuleType:
    module = ModuleType("hello")
    module.NAME = "hello"
    module.HELP = "Say hello to a run"

    def add_arguments(parser):
        parser.add_argument("run_id", type=int)

    def handle(command, options):
        command.stdout.write(f"hello, run {options['run_id']}")

    module.add_arguments, module.handle = add_arguments, handle
    return module


@pytest.fixture
def panel_kind(settings, tmp_path):
    """The workflow kind given a panel, words, a sentence, a subcommand, and no resume."""
    (tmp_path / "panel.html").write_text(
        '<section id="counter-panel">counted {{ counted }} for run {{ run.pk }}</section>'
    )
    before = kinds.get("workflow")
    settings.TEMPLATES = [
        {**settings.TEMPLATES[0], "DIRS": [*settings.TEMPLATES[0]["DIRS"], tmp_path]}
    ]

    class Counting(type(before)):  # the workflow kind, with more
        run_parts = {
            "counter-panel": RunPart(
                "panel.html", lambda run: {"counted": 7}, refresh_on="loops-changed run-changed"
            )
        }
        loop_commands = {"hello": _hello_command()}
        resume_refused = "a counter starts again instead"

        def run_context(self, run):
            return {"iteration_word": "round"}

        def event_sentence(self, event):
            return "The counter counted." if event.kind == "counter_counted" else None

    kind = kinds.register(Counting())
    yield kind
    kinds.register(before)


def test_a_kinds_panel_shows_on_its_runs_page_and_refreshes_as_a_part(
    client, viewer, guided_run, panel_kind
):
    run, row = guided_run
    add_iteration(run, row, 1, output="draft")
    with transaction.atomic():
        run.append_event("counter_counted", "refine")
    page = login(client, viewer).get(reverse("run_detail", args=[run.pk])).content.decode()
    url = reverse("run_part", args=[run.pk, "counter-panel"])
    assert f'<section id="counter-panel">counted 7 for run {run.pk}</section>' in page
    assert f'hx-get="{url}" hx-trigger="sse:loops-changed, sse:run-changed"' in page
    assert 'hx-target="#counter-panel"' in page
    assert "The counter counted." in page  # its sentence in the event log
    assert "refine · round 1" in page and "refine · iteration 1" not in page  # its word
    part = client.get(url).content.decode()
    assert part == f'<section id="counter-panel">counted 7 for run {run.pk}</section>'
    timeline = client.get(reverse("run_part", args=[run.pk, "timeline"])).content.decode()
    assert "refine · round 1" in timeline


def test_a_part_only_a_kind_gives_is_not_found_once_it_is_gone(
    client, viewer, guided_run, panel_kind
):
    run, _ = guided_run
    url = reverse("run_part", args=[run.pk, "counter-panel"])
    assert login(client, viewer).get(url).status_code == 200
    kinds.register(type(panel_kind).__mro__[1]())  # the workflow kind without the panel
    assert client.get(url).status_code == 404
    assert "counter-panel" not in client.get(reverse("run_detail", args=[run.pk])).content.decode()


def test_a_kind_that_refuses_resume_has_no_resume_button(client, operator, guided_run, panel_kind):
    run, _ = guided_run
    Run.objects.filter(pk=run.pk).update(status=Run.Status.FAILED)
    page = login(client, operator).get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_resume", args=[run.pk]) not in page
    kinds.register(type(panel_kind).__mro__[1]())  # the workflow kind, which resumes
    page = client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert reverse("run_resume", args=[run.pk]) in page


def test_manage_py_loop_offers_each_kinds_subcommands(panel_kind):
    out = StringIO()
    call_command("loop", "hello", "42", stdout=out)
    assert out.getvalue().strip() == "hello, run 42"
