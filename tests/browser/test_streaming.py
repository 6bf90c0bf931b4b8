"""The running iteration's output reaches an open page while the agent writes it."""

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from runs.executor.context import run_dirs
from tests.browser.conftest import log_in, mark_page, still_same_page
from tests.conftest import wait_for, wait_run

pytestmark = pytest.mark.browser


def talkative_recipe(go_file: str) -> str:
    """Three lines a second apart, then the agent waits for the test's go (a file in the
    run's folder, the only one its sandbox shows): whether the iteration is still running
    when the page shows line 3 never depends on the machine."""
    command = (
        'for i in 1 2 3; do echo "line $i <b>bold</b>"; sleep 1; done; '
        f"until rm {go_file} 2>/dev/null; do sleep 0.05; done; echo DONE"
    )
    return f"""
name: talkative
providers:
  talker:
    kind: command
    command: '{command}'
nodes:
  - id: talk
    provider: talker
    loop:
      prompt: Say three things.
      until: DONE
      max_iterations: 2
"""


def test_output_streams_into_the_open_page(
    live_worker, make_recipe, operator, console_server, page, tmp_path
):
    run = services.start_run(
        make_recipe(talkative_recipe("go"), slug="talkative"),
        actor=Actor.operator(operator, "console"),
    )
    wait_for(lambda: run.iterations.filter(status="running").exists(), 60, message="iteration")
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    mark_page(page)
    live_output = page.locator("#timeline pre.live-output")
    # Line 3 is written two seconds into the iteration: it can only arrive through the stream.
    expect(live_output).to_contain_text("line 3 <b>bold</b>")
    assert run.iterations.get().status == "running"
    (run_dirs(run)[0] / "go").touch()
    expect(page.locator("#run-header .badge").first).to_have_text("completed")
    expect(page.locator("#timeline .iteration").first).to_contain_text("the agent said it was done")
    assert still_same_page(page)
    wait_run(run, "completed")


RECORDER = """
window.__liveTexts = {};
const record = () => {
  for (const pre of document.querySelectorAll('pre[data-live-output]')) {
    const seen = (window.__liveTexts[pre.dataset.liveOutput] ||= []);
    if (seen[seen.length - 1] !== pre.textContent) seen.push(pre.textContent);
  }
};
new MutationObserver(record).observe(document.body,
  {childList: true, subtree: true, characterData: true});
record();
"""
LINES = "".join(f"line {i}\n" for i in range(1, 6))


def numbered_lines_recipe(go_file: str) -> str:
    """Five numbered lines half a second apart, then the agent waits for the test's go
    (so "still running" never depends on how fast the machine is)."""
    command = (
        'for i in 1 2 3 4 5; do echo "line $i"; sleep 0.5; done; '
        f"until rm {go_file} 2>/dev/null; do sleep 0.05; done"
    )
    return f"""
name: numbered
providers:
  printer:
    kind: command
    command: '{command}'
nodes:
  - id: print
    provider: printer
    loop:
      prompt: Print lines.
      until: NEVER-SAID
      max_iterations: 3
"""


def open_recording(page, server, run):
    page.goto(server + run.get_absolute_url())
    page.evaluate(RECORDER)
    mark_page(page)


def texts_seen(page, iteration) -> list[str]:
    return page.evaluate(f"window.__liveTexts['it-{iteration.pk}'] || []")


def test_every_line_reaches_the_open_page_in_order(
    live_worker, make_recipe, operator, console_server, page, chromium, tmp_path
):
    run = services.start_run(
        make_recipe(numbered_lines_recipe("go"), slug="numbered"),
        actor=Actor.operator(operator, "console"),
    )
    log_in(page, console_server, "otto")
    open_recording(page, console_server, run)
    late_tab = None
    for number in (1, 2, 3):
        it = wait_for(
            lambda n=number: run.iterations.filter(number=n, status="running").first(),
            60,
            message=f"iteration {number} running",
        )
        if number == 2:
            # A second tab, opened once the agent has written some of its lines.
            wait_for(lambda pk=it.pk: "line 2" in run.iterations.get(pk=pk).raw_output, 60)
            late_tab = page.context.new_page()
            open_recording(late_tab, console_server, run)
        live_output = page.locator(f'pre[data-live-output="it-{it.pk}"]')
        expect(live_output).to_contain_text("line 5")
        for tab in [page] + ([late_tab] if number >= 2 else []):
            expect(tab.locator(f'pre[data-live-output="it-{it.pk}"]')).to_contain_text("line 5")
            seen = texts_seen(tab, it)
            # Every state the card went through is the agent's output so far: line 1 first,
            # no line missing, none twice.
            assert seen and all(LINES.startswith(text.lstrip("\n")) for text in seen), seen
            assert seen[-1] == LINES
        assert run.iterations.get(pk=it.pk).status == "running"
        (run_dirs(run)[0] / "go").touch()
    wait_run(run, "completed", "failed")
    assert still_same_page(page) and still_same_page(late_tab)
