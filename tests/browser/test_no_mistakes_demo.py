"""The bundled no-mistakes demo in Chromium, from the start form to the merge: a demo
repository made on demand, its branch picked from the list, the pipeline watched live,
the review request merged by a person; the target branch then has the fix."""

import re
import subprocess
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.models import ReviewRequest, Run
from tests.browser.conftest import log_in, mark_page, screenshot, still_same_page

pytestmark = pytest.mark.browser


def test_the_no_mistakes_demo_from_the_start_form_to_the_merge(
    live_worker, bundled, operator, console_server, page
):
    log_in(page, console_server, "otto")
    page.goto(console_server + "/recipes/no-mistakes-demo/start/")
    page.click("button:has-text('Create a demo repository')")
    expect(page.locator(".messages")).to_contain_text("Made a demo repository")
    branch = page.locator("select[name=input_branch]")
    expect(branch.locator("option")).to_have_text(["—", "main", "feature/greeting"])
    branch.select_option("feature/greeting")
    expect(page.locator("select[name=input_target_branch]")).to_have_value("main")
    screenshot(page, "no-mistakes-start")
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
    screenshot(page, "no-mistakes-approved")

    card.locator("a:has-text('Review request: feature/greeting → main')").click()
    page.wait_for_url(re.compile(r"/runs/\d+/review/$"))
    commits = page.locator(".commits li")
    expect(commits).to_have_count(3)
    expect(commits.first).to_contain_text("docs: document greet() in the README")
    expect(page.locator("pre.diff")).to_contain_text('return f"Hello, {name}!"')
    logs = page.locator("details")
    expect(logs).to_have_count(3)  # tests (failed), tests (passed), lint
    expect(logs.first).to_contain_text("FAILED (failures=1)")
    screenshot(page, "no-mistakes-review")
    page.click("[data-merge]")
    expect(page.locator(".decision")).to_contain_text("Merged into main by otto")
    screenshot(page, "no-mistakes-merged")

    fixed = subprocess.run(
        ["git", "show", "main:greeting.py"], cwd=repository, capture_output=True, text=True
    ).stdout
    assert 'return f"Hello, {name}!"' in fixed
    tests = subprocess.run(
        ["git", "log", "--format=%s", "-1", "main"], cwd=repository, capture_output=True, text=True
    ).stdout
    assert tests.startswith("Merge feature/greeting into main")
    assert ReviewRequest.objects.get(run=run).merged_by == operator
