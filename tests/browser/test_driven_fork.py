"""A person forks a driven run from a pipeline step: the step's card offers "Fork from here",
the form asks for feedback only, and the new run shows the carried loop iteration and the
one the fork ran with that feedback (loops/driven/forking.py)."""

import re

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from loops.driven.models import Loop
from runs import services
from runs.actor import Actor
from runs.models import Iteration, Run
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_run
from tests.driven.conftest import driven_recipe
from tests.driven.test_fork import HOST

pytestmark = pytest.mark.browser


def test_fork_a_driven_run_from_a_pipeline_step(
    live_worker, make_recipe, operator, console_server, page
):
    recipe = make_recipe(driven_recipe("host-agent", providers=HOST), slug="driven-fork")
    original = wait_run(
        services.start_run(recipe, actor=Actor.operator(operator, "console"), message="Widget 2.0")
    )
    assert original.status == "completed", original.error
    step = Iteration.objects.get(run=original, node_id="drafter", number=1)

    log_in(page, console_server, "otto")
    page.goto(console_server + original.get_absolute_url())
    page.locator(f"#iteration-{step.pk} [data-fork-link]").click()
    expect(page.locator("#fork-title")).to_contain_text("after drafter · iteration 1")
    expect(page.locator("#fork-prompt")).to_have_count(0)  # feedback only
    page.fill("#fork-feedback", "Say who it is for.")
    screenshot(page, "driven-fork-form")
    page.click("button:has-text('Fork and continue')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    fork = Run.objects.get(forked_from=original)
    assert page.url.endswith(fork.get_absolute_url())
    expect(page.locator("#run-header")).to_contain_text("Forked from")

    wait_run(fork, "completed", "failed", "cancelled")
    page.reload()
    carried = page.locator(".iteration", has=page.locator(".carried"))
    expect(carried).to_have_count(2)  # researcher and drafter of loop iteration 1
    expect(page.locator(".iteration", has_text="drafter · iteration 2")).to_have_count(1)
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    screenshot(page, "driven-fork-run")
    loop = Loop.objects.get(run=fork)
    assert loop.iterations.get(number=2).feedback == "Say who it is for."
    # The loop that went on is the fork's: it started with the fork, and lasted no longer.
    fork.refresh_from_db()
    assert loop.started_at >= fork.created_at
    assert loop.duration <= fork.finished_at - fork.created_at
    page.goto(console_server + f"/loops/{loop.pk}/")
    started = timezone.localtime(loop.started_at).strftime("%Y-%m-%d %H:%M:%S")
    expect(page.locator(".facts")).to_contain_text(started)
    # One "Loop N" on its own page: the history below does not repeat the loop's card.
    expect(page.get_by_text(f"Loop {loop.pk}", exact=True)).to_have_count(1)
    page.goto(console_server + "/loops/")
    row = page.locator("tr", has=page.locator(f"a[href='/loops/{loop.pk}/']"))
    expect(row).to_contain_text(timezone.localtime(loop.started_at).strftime("%Y-%m-%d %H:%M"))
