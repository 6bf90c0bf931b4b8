"""The inbox and a convergence chart on a 390 px phone (issue 41): a chip only for the
statuses some run shows, no keyboard hint where there is no keyboard, and a chart as wide
as its card with labels a person can read."""

import pytest
from playwright.sync_api import expect

from runs.models import NodeRun
from tests.browser.conftest import log_in, screenshot
from tests.console.conftest import add_iteration, open_loop_gate, quiet_start

pytestmark = pytest.mark.browser

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}

# The size a label is drawn at: its font size, scaled as its SVG is (an SVG's text shrinks
# with its viewBox).
RENDERED_FONT_PX = """el => {
  const size = parseFloat(getComputedStyle(el).fontSize);
  const svg = el.ownerSVGElement;
  if (!svg) return size;
  const m = svg.getScreenCTM();
  return size * Math.min(Math.abs(m.a), Math.abs(m.d));
}"""


def scored_loop_at_its_gate(bundled, operator):
    run = quiet_start(bundled["guided-refine"], operator, "a haiku")
    row = NodeRun.objects.create(
        run=run, node_id="refine", kind="loop", status="running", max_iterations=9
    )
    for number, score in enumerate([40, 55, 62, 70, 81, 88], 1):
        last = add_iteration(run, row, number, structured={"score": score})
    row.iteration_count = 6
    row.save()
    open_loop_gate(run, row, last)
    return run


def test_the_inbox_and_a_chart_on_a_phone(
    transactional_db, bundled, viewer, operator, console_server, chromium
):
    run = scored_loop_at_its_gate(bundled, operator)
    context = chromium.new_context(**PHONE)
    page = context.new_page()
    log_in(page, console_server, "vera")

    # One run, paused: two chips (all runs, paused), on one line, not fourteen on six.
    chips = page.locator("#inbox .counts li")
    expect(chips).to_have_count(2)
    expect(chips.nth(0)).to_have_text("all runs 1")
    expect(chips.nth(1)).to_contain_text("paused")
    heights = {round(box["y"]) for box in (chip.bounding_box() for chip in chips.all())}
    assert len(heights) == 1, heights
    # No keys on a phone: the gate list says its order, not which keys move in it.
    hint = page.locator("#inbox .hint")
    expect(hint).to_contain_text("Longest waiting first.")
    expect(hint.locator(".keys-hint")).to_be_hidden()
    expect(page.locator("#inbox td[data-label=waiting]")).to_have_text("under a minute")
    screenshot(page, "inbox-phone")

    page.goto(console_server + run.get_absolute_url())
    figure = page.locator("#run-chart figure[data-chart-node=refine]")
    svg = figure.locator(".chart-svg")
    expect(svg).to_be_visible()
    svg.scroll_into_view_if_needed()
    card = page.locator("#run-chart").bounding_box()
    drawn = svg.bounding_box()
    assert drawn["width"] >= 0.8 * card["width"], (drawn, card)
    assert drawn["height"] >= 120, drawn  # not a strip
    labels = figure.locator(".tick")
    expect(labels).to_have_count(4)  # highest, lowest, first and last iteration
    for label in labels.all():
        size = label.evaluate(RENDERED_FONT_PX)
        assert size >= 11, f"{label.text_content()!r} is drawn at {size:.1f} px"
        box = label.bounding_box()
        assert box["x"] >= card["x"] and box["x"] + box["width"] <= card["x"] + card["width"]
    page.locator("#run-chart").screenshot(path=str(_shot("chart-phone")))
    context.close()


def test_a_laptop_keeps_the_keyboard_hint(
    transactional_db, bundled, viewer, operator, console_server, page
):
    scored_loop_at_its_gate(bundled, operator)
    log_in(page, console_server, "vera")
    expect(page.locator("#inbox .hint .keys-hint")).to_be_visible()


def _shot(name):
    from tests.browser.conftest import SCREENSHOTS

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return SCREENSHOTS / f"{name}.png"
