"""A step-machine run that ends approved on a branch with no commit its target lacks, in
Chromium: the review request says there is nothing to merge and offers no Merge button,
the run says so too (not "ready for a person to merge"), and the inbox does not list it as
needing a person."""

import pytest
from playwright.sync_api import expect

from runs import services
from runs.actor import Actor
from tests.browser.conftest import log_in, screenshot
from tests.stepmachine.conftest import git, shown
from tests.stepmachine.test_pages import NOTHING_NEW

pytestmark = pytest.mark.browser


def test_a_review_with_no_commits_says_nothing_to_merge(
    live_worker, make_recipe, operator, console_server, page, tmp_path
):
    repository = tmp_path / "repo"
    repository.mkdir()
    git("init", "-q", "-b", "main", cwd=repository)
    (repository / "README.md").write_text("hello\n")
    git("add", ".", cwd=repository)
    git("commit", "-q", "-m", "first", cwd=repository)
    git("branch", "feature", cwd=repository)  # nothing on it that main lacks
    run = services.start_run(
        make_recipe(NOTHING_NEW, slug="nothing-new"),
        actor=Actor.operator(operator, "console"),
        inputs={"branch": "feature"},
        workdir=str(repository),
    )
    shown(run, "nothing_to_merge")

    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-header .badge").first).to_have_text("nothing_to_merge")
    card = page.locator("#step-machine")
    expect(card).to_contain_text("nothing to merge")
    for now in ("#run-header", "#step-machine"):
        expect(page.locator(now)).not_to_contain_text("ready for a person to merge")
    card.locator("a:has-text('Review request: feature → main')").click()
    expect(page.locator(".decision")).to_contain_text(
        "Nothing to merge: feature has no commit that main does not have."
    )
    expect(page.locator("[data-merge]")).to_have_count(0)
    expect(page.locator("body")).not_to_contain_text("Merging puts")
    screenshot(page, "step-machine-nothing-to-merge")

    page.goto(console_server + "/")
    expect(page.locator("#inbox")).to_contain_text(f"Run {run.pk}")  # among the finished
    expect(page.locator(".attention")).to_have_count(0)
    expect(page.locator("#inbox")).not_to_contain_text("Review and merge")
