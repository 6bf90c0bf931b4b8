"""A new user's first ten minutes, at laptop and phone width: log in, start every bundled
recipe from its form, decide every gate, cancel a run, open the admin editor on a recipe
with an error on line 34. No script error, nothing scrolls sideways on the phone, and a
screenshot of every stop in test-output/screenshots/."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_run

pytestmark = pytest.mark.browser

WIDTHS = {"laptop": (1280, 900), "phone": (390, 844)}

# 33 good lines, then a dependency on a node that does not exist on line 34.
GOOD_LINES = ["name: line-34", "description: A recipe with one mistake.", "nodes:"]
for number in range(1, 11):
    GOOD_LINES += [f"  - id: step{number}", f"    bash: echo {number}", ""]
GOOD = "\n".join(GOOD_LINES[:32]) + "\n"
BROKEN = GOOD + "  - id: broken\n    depends_on: [nowhere]\n    bash: echo broken\n"
assert BROKEN.splitlines()[33] == "    depends_on: [nowhere]"


class Walk:
    def __init__(self, page, server, name):
        self.page, self.server, self.name = page, server, name
        self.errors: list[str] = []
        self.phone = name == "phone"
        page.on("pageerror", lambda exc: self.errors.append(f"{page.url}: {exc}"))
        page.on("console", self.console)

    def console(self, msg) -> None:
        if msg.type != "error":
            return
        where = (msg.location or {}).get("url", "")
        self.errors.append(f"{self.page.url}: {msg.text} ({where})")

    def shot(self, what: str) -> None:
        screenshot(self.page, f"walk-{self.name}-{what}")
        if self.phone:
            width = self.page.evaluate("document.documentElement.scrollWidth")
            assert width <= 392, f"{what} scrolls sideways on a phone ({width}px)"

    def go(self, path: str, what: str) -> None:
        self.page.goto(self.server + path)
        self.shot(what)

    def start(self, slug: str, message: str) -> Run:
        self.go("/recipes/", f"recipes-before-{slug}")
        row = self.page.locator("tr", has=self.page.locator(f"a[href='/recipes/{slug}/']"))
        start = row.locator("a:has-text('Start run')")
        expect(start).to_be_visible()
        start.scroll_into_view_if_needed()
        box = start.bounding_box()
        assert box and box["x"] + box["width"] <= self.page.viewport_size["width"], slug
        start.click()
        self.page.wait_for_url(re.compile(rf"/recipes/{slug}/start/$"))
        self.page.fill("textarea[name=message]", message)
        self.shot(f"start-{slug}")
        self.page.click("button:has-text('Start run')")
        self.page.wait_for_url(re.compile(r"/runs/\d+/$"))
        return Run.objects.filter(recipe__slug=slug, message=message).latest("id")


@pytest.mark.parametrize("width", list(WIDTHS))
def test_first_ten_minutes(
    width, live_worker, bundled, admin_user, make_recipe, console_server, chromium
):
    w, h = WIDTHS[width]
    context = chromium.new_context(viewport={"width": w, "height": h}, is_mobile=width == "phone")
    context.set_default_timeout(30_000)
    page = context.new_page()
    walk = Walk(page, console_server, width)
    try:
        log_in(page, console_server, "ada")
        walk.shot("inbox")

        # Runs that finish on their own: every bundled recipe without a gate (the Python
        # ones included).
        gated = {"guided-refine", "release-approval", "scored-polish"}
        # Step machines work on a repository and end approved, for a person to merge: the
        # demo's own walk is tests/browser/test_no_mistakes_demo.py.
        step_machines = {slug for slug, recipe in bundled.items() if recipe.kind == "planeai"}
        assert gated <= set(bundled)
        for slug in sorted(set(bundled) - gated - step_machines):
            run = walk.start(slug, f"{slug} by {width}")
            expect(page.locator("#run-header .badge").first).to_have_text("completed")
            walk.shot(f"run-{slug}")
            wait_run(run, "completed")

        # A loop gate: read the draft, accept it.
        run = walk.start("guided-refine", f"a haiku by {width}")
        gate = page.locator("#gate-panel")
        expect(gate).to_contain_text("The agent said DONE.")
        walk.shot("gate-loop")
        page.locator("[data-gate-primary]").click()
        expect(page.locator("#run-header .badge").first).to_have_text("completed")
        walk.shot("gate-loop-accepted")
        wait_run(run, "completed")

        # A stop rule's gate: the scores stopped improving; the chart draws the window.
        run = walk.start("scored-polish", f"an essay by {width}")
        expect(gate).to_contain_text("Stop rule plateau")
        expect(page.locator(".rule-label.plateau")).to_have_text("plateau window")
        walk.shot("gate-stop-rule")
        page.locator("[data-gate-primary]").click()
        expect(page.locator("#run-header .badge").first).to_have_text("completed")
        wait_run(run, "completed")

        # An approval with decisions: ship.
        run = walk.start("release-approval", f"release by {width}")
        expect(gate).to_contain_text("ship now or hold?")
        walk.shot("gate-approval")
        gate.locator("button:has-text('Ship it')").click()
        expect(page.locator("#run-header .badge").first).to_have_text("completed")
        wait_run(run, "completed")
        # The gate's own page (where notifications link): the keys above the decision, what
        # was decided in the button's words (not "accepted"), and where the run stands now.
        walk.go(f"/runs/{run.pk}/gates/{run.gates.get().pk}/", "gate-page-decided")
        expect(page.locator("#gate-panel .decision")).to_contain_text("decided Ship it by ada")
        expect(page.locator("#gate-panel .decision .badge")).to_have_text("decided")
        expect(page.locator(".run-now")).to_contain_text(f"Run {run.pk} is now completed")
        keys = page.locator(".keys-bar").bounding_box()
        assert keys["y"] < page.locator("#gate-panel").bounding_box()["y"]

        # Another approval, rejected with a reason; the reason stays on the run.
        run = walk.start("release-approval", f"rejected release by {width}")
        expect(gate).to_contain_text("ship now or hold?")
        gate.locator("details.reject summary").click()
        gate.locator("textarea[name=reason]").fill("the changelog is incomplete")
        walk.shot("gate-reject")
        gate.locator("button:has-text('Reject')").click()
        expect(gate.locator(".notice")).to_have_text("Rejected at decide.")
        wait_run(run, "failed")
        page.reload()
        # The reason is said once, in the run's header; the decision points there.
        reason = "the changelog is incomplete"
        expect(page.locator("#run-header .error")).to_contain_text(reason)
        expect(gate).not_to_contain_text(reason)
        expect(gate).to_contain_text("the reason is at the top of the page")
        expect(page.locator("#run-nodes")).not_to_contain_text(reason)
        walk.shot("gate-rejected")
        walk.go(f"/runs/{run.pk}/gates/{run.gates.get().pk}/", "gate-page-rejected")
        expect(page.locator(".run-now")).to_contain_text(f"Run {run.pk} is now failed")

        # Cancel one run that waits at a gate; the page asks first.
        run = walk.start("release-approval", f"cancelled release by {width}")
        expect(gate).to_contain_text("ship now or hold?")
        # The inbox offers to review it, reachable without scrolling sideways.
        walk.go("/", "inbox-waiting")
        review = page.locator(f"a.button[href='/runs/{run.pk}/#gate-panel']")
        expect(review).to_be_visible()
        box = review.bounding_box()
        assert box and box["x"] + box["width"] <= page.viewport_size["width"]
        if walk.phone:  # stacked cells say what their figures are
            row = page.locator(f"tr[data-gate-item]:has(a[href='/runs/{run.pk}/'])")
            waiting = row.locator("td[data-label=waiting]")
            label = waiting.evaluate("td => getComputedStyle(td, '::before').content")
            assert label == '"waiting "', label
        review.click()
        page.wait_for_url(re.compile(rf"/runs/{run.pk}/"))
        page.locator("summary:has-text('Cancel run')").click()
        walk.shot("cancel-confirm")
        page.locator("button:has-text('Yes, cancel the run')").click()
        expect(page.locator("#run-header .badge").first).to_have_text("cancelled")
        walk.shot("cancelled")
        wait_run(run, "cancelled")

        # Inbox and the runs list, with their duration and usage columns.
        walk.go("/", "inbox-after")
        expect(page.locator("#inbox")).to_contain_text("Recently finished")
        walk.go("/runs/", "runs")
        expect(page.locator("table.runs")).to_contain_text("cost unknown")

        # The admin editor on a recipe with an error on line 34.
        recipe = make_recipe(GOOD, slug=f"line-34-{width}")
        page.goto(f"{console_server}/admin/recipes/recipe/{recipe.pk}/change/")
        page.fill("textarea.recipe-source", BROKEN)
        page.click("input[name=_continue]")
        expect(page.locator(".errorlist").first).to_contain_text("line 34")
        screenshot(page, f"walk-{width}-admin-line-34")
        walk.go(f"/recipes/line-34-{width}/", "recipe-detail")
    finally:
        context.close()
    assert walk.errors == [], walk.errors
