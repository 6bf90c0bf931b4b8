"""The inbox's order on a laptop (1,366 px) and a phone (390 px), issue 40: every row of the
ranked card shows why it stands there, inside the window, and nothing makes the page scroll
sideways. The order itself is checked row by row in tests/console/test_inbox_ranking.py."""

import re

import pytest
from playwright.sync_api import expect

from tests.browser.conftest import log_in, screenshot
from tests.console.test_inbox_ranking import seed

pytestmark = pytest.mark.browser

SIZES = {
    "1366": {"viewport": {"width": 1366, "height": 768}},
    "390": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}


def _loose(reason: str) -> re.Pattern:
    """A reason whose figures may have moved on while the page loaded ("12 minutes")."""
    number = r"\d+(?:\.\d+)?"
    return re.compile("^" + number.join(map(re.escape, re.split(number, reason))) + "$")


@pytest.mark.parametrize("width", list(SIZES))
def test_each_row_says_why_and_fits_the_window(
    transactional_db, bundled, viewer, operator, console_server, chromium, width
):
    seeded = seed(bundled, operator)
    context = chromium.new_context(**SIZES[width])
    page = context.new_page()
    log_in(page, console_server, "vera")

    rows = page.locator("#inbox table.ranked-rows tbody tr")
    expect(rows).to_have_count(len(seeded.expected))
    window = page.evaluate("window.innerWidth")
    for index, (pk, _, reason) in enumerate(seeded.order()):
        row = rows.nth(index)
        expect(row).to_contain_text(f"Run {pk}")
        why = row.locator("td.why")
        expect(why).to_have_text(_loose(reason))
        why.scroll_into_view_if_needed()
        expect(why).to_be_visible()
        box = why.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= window, (reason, box, window)
    wide = page.evaluate("document.documentElement.scrollWidth")
    assert wide <= window, f"the page scrolls sideways: {wide} px in a {window} px window"
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, f"inbox-ranking-{width}")
    context.close()
