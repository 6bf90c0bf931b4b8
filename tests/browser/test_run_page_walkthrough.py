"""The run page in Chromium as a newcomer used it (issue 41): a long unbroken input never
makes it scroll sideways, a re-run asks before it spends, a running node's duration ticks
like the header's, and a driven run's Nodes card agrees with its loop card."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from loops.driven.models import Loop
from runs.executor.context import run_dirs
from runs.models import NodeRun, Run
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_for, wait_run
from tests.console.conftest import quiet_start
from tests.driven.conftest import driven_recipe

pytestmark = pytest.mark.browser

LONG_URL = "https://example.com/" + "a" * 300  # 320 characters, no place to break


@pytest.mark.parametrize("width", [390, 1366])
def test_a_long_unbroken_input_does_not_widen_the_run_page(
    transactional_db, bundled, operator, console_server, chromium, width
):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    Run.objects.filter(pk=run.pk).update(inputs={"tone": "friendly", "audience": LONG_URL})
    context = chromium.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-header .inputs")).to_contain_text(LONG_URL[:40])
    sizes = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    screenshot(page, f"run-long-input-{width}")
    context.close()
    assert sizes[0] == sizes[1] == width, f"the page is {sizes[0]} px wide at {width} px"


def test_re_run_asks_before_it_starts_a_run(live_worker, bundled, operator, console_server, page):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    Run.objects.filter(pk=run.pk).update(status="completed", finished_at=timezone.now())
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    page.locator("#run-header summary", has_text="Re-run on v1").click()
    confirm = page.locator("details[data-confirm=rerun] .confirm-box")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text("starts a new run")
    assert not Run.objects.filter(rerun_of=run).exists()  # one click started nothing
    screenshot(page, "run-rerun-confirm")
    confirm.locator("button", has_text="Yes, re-run").click()
    page.wait_for_url(lambda url: not url.endswith(run.get_absolute_url()))
    new = Run.objects.get(rerun_of=run)
    assert page.url.endswith(new.get_absolute_url())
    wait_for(lambda: pending_or_done(new), 60, message="the re-run at its gate")


def pending_or_done(run) -> bool:
    run.refresh_from_db()
    return run.status in ("paused", "completed", "failed")


def test_a_running_nodes_duration_ticks_like_the_header(
    transactional_db, bundled, operator, console_server, page
):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    since = timezone.now() - timedelta(seconds=20)
    Run.objects.filter(pk=run.pk).update(status="running", started_at=since)
    NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="running", max_iterations=5, started_at=since
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    clock = page.locator("#run-nodes .node-line [data-running-since]")
    expect(clock).to_have_count(1)
    first = clock.inner_text()
    # No event arrives for this run: only the page's clock can move it.
    expect(clock).not_to_have_text(first, timeout=10_000)


def finishing_host(tmp_path) -> str:
    """A host that finishes its loop after one iteration, then waits for `go` in the run's
    folder before its turn ends (as a host writing its answer would)."""
    script = tmp_path / "host.sh"
    script.write_text(
        "set -e\n"
        """$LOOP_TOOL_CMD core_start_loop --pipeline '["researcher", "drafter"]'\n"""
        "$LOOP_TOOL_CMD core_finish_loop\n"
        "until rm go 2>/dev/null; do sleep 0.05; done\n"
        "echo 'Done.'\n"
    )
    return f'finishing-host: {{kind: command, command: "bash {script}"}}'


def test_a_driven_runs_nodes_card_agrees_with_its_loop_card(
    live_worker, make_recipe, operator, console_server, page, tmp_path
):
    from runs import services
    from runs.actor import Actor

    source = driven_recipe("finishing-host", providers=finishing_host(tmp_path))
    run = services.start_run(
        make_recipe(source, slug="driven-agree"),
        actor=Actor.operator(operator, "console"),
        message="Widget 2.0",
    )
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    loop = wait_for(lambda: Loop.objects.filter(run=run).first(), 60, message="the loop")
    expect(page.locator(f"#loop-{loop.pk} .badge").first).to_have_text("completed")
    # The host's turn is still at work; its agents are not.
    for agent in ("researcher", "drafter"):
        row = page.locator(
            "#run-nodes li.node", has=page.locator(f"code.node-id:text-is('{agent}')")
        )
        expect(row.locator(".badge").first).to_have_text("completed", timeout=20_000)
    host = page.locator("#run-nodes li.node", has=page.locator("code.node-id:text-is('host')"))
    expect(host.locator(".badge").first).to_have_text("running")
    screenshot(page, "driven-nodes-agree")
    (run_dirs(run)[0] / "go").touch()
    wait_run(run, "completed")
