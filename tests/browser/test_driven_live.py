"""A person watches a driven run live: the pipeline the host composed, each iteration with
its steps' outputs and the host's feedback, and the loop's end appear without a reload.

The host is a command agent that waits for the test's go between its calls, so what the
page shows at each moment never depends on the machine's speed."""

import pytest
from playwright.sync_api import expect

from loops.driven.models import Loop
from runs import services
from runs.actor import Actor
from runs.executor.context import run_dirs
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page
from tests.conftest import wait_for, wait_run
from tests.driven.conftest import driven_recipe

pytestmark = pytest.mark.browser


def waiting_host(tmp_path) -> str:
    """The host waits for go1 and go2 in the run's folder (the only one its sandbox shows)."""
    script = tmp_path / "host.sh"
    go1, go2 = "go1", "go2"
    script.write_text(
        "set -e\n"
        """$LOOP_TOOL_CMD core_start_loop --pipeline '["researcher", "drafter"]'\n"""
        f"until rm {go1} 2>/dev/null; do sleep 0.05; done\n"
        '$LOOP_TOOL_CMD core_iterate_loop --feedback "Say who it is for, in one line."\n'
        f"until rm {go2} 2>/dev/null; do sleep 0.05; done\n"
        "$LOOP_TOOL_CMD core_finish_loop\n"
        "echo 'The note is ready: I finished the loop.'\n"
    )
    return f'waiting-host: {{kind: command, command: "bash {script}"}}'


def test_a_driven_run_is_drawn_live(
    live_worker, make_recipe, operator, console_server, page, tmp_path
):
    source = driven_recipe("waiting-host", providers=waiting_host(tmp_path), max_iterations=4)
    recipe = make_recipe(source, slug="driven-live")
    run = services.start_run(
        recipe, actor=Actor.operator(operator, "console"), message="Widget 2.0"
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)

    panel = page.locator("#driven-loops")
    # Loop 1 started (it may have before the page opened: then the page drew it already).
    loop = wait_for(lambda: Loop.objects.filter(run=run).first(), 60, message="the loop")
    expect(panel.locator(".pipeline")).to_have_text("researcher → drafter")
    expect(panel.locator(f"#loop-{loop.pk}-iteration-1 .loop-output")).to_contain_text("Demo agent")
    expect(panel.locator(".loop-progress")).to_have_text("iteration 1 of 4")
    expect(panel.locator(f"#loop-{loop.pk}-iteration-1 .loop-step")).to_have_count(2)
    screenshot(page, "driven-live-iteration-1")

    (run_dirs(run)[0] / "go1").touch()  # the host iterates with feedback: drawn without a reload
    second = panel.locator(f"#loop-{loop.pk}-iteration-2")
    expect(second.locator(".host-judgement")).to_contain_text("Say who it is for, in one line.")
    expect(second.locator(".loop-output")).to_contain_text("Demo agent: iteration 2")
    expect(panel.locator(".loop-progress")).to_have_text("iteration 2 of 4")

    (run_dirs(run)[0] / "go2").touch()  # the host finishes: loop:end, the result, the host's answer
    expect(panel.locator(f"#loop-{loop.pk} .badge").first).to_have_text("completed")
    expect(panel.locator(".loop-progress")).to_contain_text("the host was satisfied")
    expect(panel.locator(".loop-end")).to_contain_text("Demo agent: iteration 2")
    expect(panel.locator(".host-answer")).to_contain_text("The note is ready")
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    assert still_same_page(page)
    screenshot(page, "driven-live-finished")
    wait_run(run, "completed")
