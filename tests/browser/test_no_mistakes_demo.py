"""The bundled no-mistakes demo in Chromium, from the start form to the merge: a demo
repository made on demand, its branch picked from the list, the pipeline watched live,
the review request merged by a person; the target branch then has the fix. At laptop and
phone width: no script error, nothing scrolls sideways on the phone, the Merge button within
reach, and a screenshot of every stop in test-output/screenshots/."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from loops.stepmachine.models import ReviewRequest
from runs.models import Run
from tests.browser.conftest import log_in, mark_page, still_same_page
from tests.browser.test_first_ten_minutes import WIDTHS, Walk
from tests.conftest import ROOT

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("width", list(WIDTHS))
def test_the_no_mistakes_demo_from_the_start_form_to_the_merge(
    width, live_worker, worker_env, bundled, operator, console_server, chromium
):
    w, h = WIDTHS[width]
    context = chromium.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    context.set_default_timeout(60_000)
    page = context.new_page()
    walk = Walk(page, console_server, width)
    try:
        _walk_to_the_merge(page, walk, console_server, operator, worker_env)
    finally:
        context.close()
    assert not walk.errors, walk.errors


def within_reach(page, locator) -> None:
    """Visible, and its right edge inside the viewport (no sideways scroll to reach it)."""
    expect(locator).to_be_visible()
    locator.scroll_into_view_if_needed()
    box = locator.bounding_box()
    assert box and box["x"] >= 0 and box["x"] + box["width"] <= page.viewport_size["width"]


def _walk_to_the_merge(page, walk, console_server, operator, worker_env):
    log_in(page, console_server, "otto")
    page.goto(console_server + "/recipes/no-mistakes-demo/start/")
    page.click("button:has-text('Create a demo repository')")
    expect(page.locator(".messages")).to_contain_text("Made a demo repository")
    branch = page.locator("select[name=input_branch]")
    expect(branch.locator("option")).to_have_text(["—", "main", "feature/greeting"])
    branch.select_option("feature/greeting")
    expect(page.locator("select[name=input_target_branch]")).to_have_value("main")
    walk.shot("no-mistakes-start")
    within_reach(page, page.locator("button:has-text('Start run')"))
    page.click("button:has-text('Start run')")
    page.wait_for_url(re.compile(r"/runs/\d+/$"))
    mark_page(page)
    run = Run.objects.get(recipe__slug="no-mistakes-demo")
    repository = Path(run.workdir)

    card = page.locator("#step-machine")
    expect(card).to_contain_text("gatekeeper")  # sessions appear as the run goes
    expect(page.locator("#run-header .badge").first).to_have_text("approved", timeout=240_000)
    expect(card).to_contain_text("every check passed; ready for a person to merge")
    expect(card.locator(".handoffs")).to_contain_text("Fixed the root cause in greeting.py")
    assert still_same_page(page)
    walk.shot("no-mistakes-approved")

    card.locator("a:has-text('Review request: feature/greeting → main')").click()
    page.wait_for_url(re.compile(r"/runs/\d+/review/$"))
    commits = page.locator(".commits li")
    expect(commits).to_have_count(3)
    expect(commits.first).to_contain_text("docs: document greet() in the README")
    expect(page.locator("pre.diff")).to_contain_text('return f"Hello, {name}!"')
    stat = page.locator("section.card:has(pre.diff) > pre").first.text_content()
    assert stat.startswith(" README.md ")  # its first line lines up with the others
    logs = page.locator("details")
    expect(logs).to_have_count(3)  # tests (failed), tests (passed), lint
    expect(logs.first).to_contain_text("FAILED (failures=1)")
    within_reach(page, page.locator("[data-merge]"))
    walk.shot("no-mistakes-review")
    # A double-click merges once and says so: no "Already merged" error for one's own merge.
    page.dblclick("[data-merge]")
    expect(page.locator(".decision")).to_contain_text("Merged into main by otto")
    expect(page.locator(".messages .notice.success")).to_contain_text(
        "Merged feature/greeting into main"
    )
    expect(page.locator(".messages .notice.error")).to_have_count(0)
    expect(page.locator(".messages")).not_to_contain_text("Already merged")
    walk.shot("no-mistakes-merged")

    # The run says merged everywhere, not "ready for a person to merge".
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-header .badge").first).to_have_text("merged")
    expect(page.locator("#step-machine")).to_contain_text("a person merged its review request")
    expect(page.locator("#step-machine")).to_contain_text(
        "set the status: approved, then a person merged"
    )
    for now in ("#run-header", "#step-machine"):  # (the event log keeps what was said then)
        expect(page.locator(now)).not_to_contain_text("ready for a person to merge")
    page.locator("details.events summary").click()
    expect(page.locator("#event-log")).to_contain_text(
        "otto merged the review request: the run is done."
    )
    page.goto(console_server + "/runs/")
    expect(page.locator(f"tr:has(a[href='/runs/{run.pk}/']) .badge")).to_have_text("merged")
    page.goto(console_server + "/")
    chip = page.locator(".counts a[href$='?status=merged']")
    expect(chip.locator(".count")).to_have_text("1")
    # No run is approved any more: its chip is gone (the inbox shows the statuses runs have).
    expect(page.locator(".counts a[href$='?status=approved']")).to_have_count(0)
    expect(page.locator("#inbox")).not_to_contain_text("Review and merge")
    status = subprocess.run(
        [sys.executable, "manage.py", "loop", "status", str(run.pk), "--json"],
        cwd=ROOT,
        env=worker_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert status.returncode == 0, status.stderr
    said = json.loads(status.stdout)
    assert (said["status"], said["meaning"]) == (
        "merged",
        "finished; a person merged its review request",
    )

    merges = subprocess.run(
        ["git", "log", "--merges", "--format=%s", "main"],
        cwd=repository,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert len(merges) == 1, merges  # the double-click merged once
    fixed = subprocess.run(
        ["git", "show", "main:greeting.py"], cwd=repository, capture_output=True, text=True
    ).stdout
    assert 'return f"Hello, {name}!"' in fixed
    tests = subprocess.run(
        ["git", "log", "--format=%s", "-1", "main"], cwd=repository, capture_output=True, text=True
    ).stdout
    assert tests.startswith("Merge feature/greeting into main")
    assert ReviewRequest.objects.get(run=run).merged_by == operator
