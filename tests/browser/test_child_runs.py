"""A `.archon` fan-out seen in Chromium: the parent's node lists its child runs with their
status, a child's page links back to its parent, and a child's gate waits in the inbox."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from recipes.models import Recipe
from recipes.sync import sync
from runs import services
from runs.actor import Actor
from runs.models import Run
from tests.archon_repo import make_archon_repo
from tests.browser.conftest import log_in, screenshot
from tests.conftest import wait_for, wait_run

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("join", ["all_done", "all_success"])
def test_the_parent_shows_its_children_and_a_child_links_back(
    live_worker, operator, console_server, page, tmp_path, settings, join
):
    settings.LOOP_RECIPE_DIRS = [str(make_archon_repo(tmp_path / "checkout"))]
    sync()
    slug = "fan-" + join.replace("_", "-")
    run = services.start_run(
        Recipe.objects.get(slug=slug), actor=Actor.operator(operator, "console"), message="ship it"
    )
    wait_run(run, "completed", "failed")
    assert run.status == ("completed" if join == "all_done" else "failed"), run.error
    children = list(Run.objects.filter(parent=run).order_by("child_index"))
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    each = page.locator("#run-nodes li.node", has=page.locator("code.node-id", has_text="each"))
    expect(each).to_contain_text("Child runs · 3 started of 3")
    expect(each).to_contain_text("recipe handle-item")
    rows = each.locator("li.child-run")
    expect(rows).to_have_count(3)
    for row, child, status in zip(
        rows.all(), children, ["completed", "failed", "completed"], strict=True
    ):
        expect(row).to_contain_text(f"Run {child.pk}")
        expect(row.locator(".badge")).to_have_text(status)
    expect(rows.nth(1)).to_contain_text("fail-me")
    expect(each.locator(".badge").first).to_have_text(
        "completed" if join == "all_done" else "failed"
    )
    screenshot(page, f"parent-with-children-{join}")
    rows.nth(1).get_by_role("link", name=f"Run {children[1].pk}").click()
    page.wait_for_url(console_server + children[1].get_absolute_url())
    facts = page.locator("#run-header .facts")
    parent_fact = facts.locator("div", has=page.locator("dt", has_text="Child run of"))
    expect(parent_fact.locator("dd")).to_have_text(f"Run {run.pk}, node each (item 1)")
    screenshot(page, f"child-run-{join}")
    facts.get_by_role("link", name=f"Run {run.pk}").click()
    page.wait_for_url(console_server + run.get_absolute_url())


GATED_CHILD = """
name: gated-child
nodes:
  - id: ask
    approval: {message: "Ship $USER_MESSAGE?"}
"""

PARENT = """
name: parent-of-gate
nodes:
  - id: delegate
    workflow: gated-child
    input: the release
  - id: after
    depends_on: [delegate]
    bash: echo "child said $delegate.output"
"""


def test_a_childs_gate_waits_in_the_inbox_and_deciding_it_moves_the_parent(
    live_worker, make_recipe, operator, console_server, page
):
    make_recipe(GATED_CHILD, slug="gated-child")
    run = services.start_run(
        make_recipe(PARENT, slug="parent-of-gate"), actor=Actor.operator(operator, "console")
    )
    child = wait_for(lambda: Run.objects.filter(parent=run).first(), message="the child run")
    wait_run(child, "paused")
    log_in(page, console_server, "otto")
    page.goto(console_server + "/")
    waiting = page.locator("#inbox section").first
    expect(waiting).to_contain_text(f"Run {child.pk}")
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-nodes")).to_contain_text("waiting for a decision")
    page.goto(console_server + child.get_absolute_url())
    expect(page.locator("#gate-panel")).to_contain_text("Ship the release?")
    page.locator("#gate-panel button.primary").click()
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert run.nodes.get(node_id="after").output == "child said approved"
