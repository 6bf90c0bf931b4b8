"""The start form's message in a real browser (issue 41): counted as the gate's feedback is,
never cut at the limit, refused in the server's own words and given back whole."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.browser.conftest import log_in, screenshot

pytestmark = pytest.mark.browser

LENGTH = "document.querySelector('textarea[name=message]').value.length"


def test_the_start_form_counts_the_message_and_never_cuts_it(
    transactional_db, bundled, operator, console_server, page
):
    log_in(page, console_server, "otto")
    page.goto(console_server + "/recipes/counter-loop/start/")
    message = page.locator("textarea[name=message]")
    counter = page.locator("#message-limit")
    expect(counter).to_have_text("Up to 100,000 characters.")
    message.fill("three steps\nand a fourth")
    expect(counter).to_have_text("24 of 100,000 characters.")  # a line break is one

    message.fill("x" * 100_001)
    assert page.evaluate(LENGTH) == 100_001  # no maxlength cut it
    expect(counter).to_have_text(
        "100,001 of 100,000 characters: 1 too many. Shorten it; as it is, the run does not start."
    )
    expect(counter).to_have_class(re.compile("over-limit"))
    screenshot(page, "start-message-over-the-limit")
    page.click("button:has-text('Start run')")
    expect(page.locator(".field-error")).to_have_text(
        "The message is 100,001 characters; the limit is 100,000."
    )
    assert page.evaluate(LENGTH) == 100_001  # given back whole
    expect(counter).to_contain_text("1 too many")  # counted again as the page loads
    assert not Run.objects.exists()

    message.fill("x" * 100_000)
    expect(counter).to_have_text("100,000 of 100,000 characters.")
    expect(counter).not_to_have_class(re.compile("over-limit"))
