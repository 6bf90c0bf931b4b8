"""The running iteration's output reaches an open page while the agent writes it."""

import pytest
from playwright.sync_api import expect

from runs import services
from tests.browser.conftest import log_in, mark_page, still_same_page
from tests.conftest import wait_for, wait_run

pytestmark = pytest.mark.browser

TALKATIVE = """
name: talkative
providers:
  talker:
    kind: command
    command: 'for i in 1 2 3; do echo "line $i <b>bold</b>"; sleep 1; done; echo DONE'
nodes:
  - id: talk
    provider: talker
    loop:
      prompt: Say three things.
      until: DONE
      max_iterations: 2
"""


def test_output_streams_into_the_open_page(
    live_worker, make_recipe, operator, console_server, page
):
    run = services.start_run(make_recipe(TALKATIVE, slug="talkative"), user=operator)
    wait_for(lambda: run.iterations.filter(status="running").exists(), 30, message="iteration")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)
    live_output = page.locator("#timeline pre.live-output")
    # Line 3 is written two seconds into the iteration: it can only arrive through the stream.
    expect(live_output).to_contain_text("line 3 <b>bold</b>")
    assert run.iterations.get().status == "running"
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    expect(page.locator("#timeline .iteration").first).to_contain_text("completed via until")
    assert still_same_page(page)
    wait_run(run, "completed")
