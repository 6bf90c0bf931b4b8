"""Chromium (the machine's, found by tests/find_chromium.py, driven by Playwright) against the console served by uvicorn — the
same ASGI server `make run` uses, so the live stream is tested as users get it — with a
real worker behind it (`console_server`, in tests/conftest.py)."""

from __future__ import annotations

import os

import pytest

from tests import find_chromium
from tests.conftest import ROOT

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# in between are ordinary blocking calls.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM_ARGS = find_chromium.ARGS
SCREENSHOTS = ROOT / "test-output" / "screenshots"


@pytest.fixture(scope="session")
def chromium():
    from playwright.sync_api import expect, sync_playwright

    try:
        executable = find_chromium.executable()
    except find_chromium.NoChromium as exc:
        pytest.fail(str(exc), pytrace=False)
    # Other suites may share the machine: give the worker and the live stream time (an
    # expectation returns as soon as it holds).
    expect.set_options(timeout=60_000)

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        yield browser
        browser.close()


@pytest.fixture
def page(chromium):
    context = chromium.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(60_000)
    page = context.new_page()
    yield page
    context.close()


def log_in(page, server: str, username: str) -> None:
    page.goto(server + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", "pw-" + username)
    page.click("button[type=submit]")
    page.wait_for_url(server + "/")


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def mark_page(page) -> None:
    """Leave a mark in the page's JavaScript state; a reload would wipe it."""
    page.evaluate("window.__loopConsoleNoReload = true")


def still_same_page(page) -> bool:
    return page.evaluate("window.__loopConsoleNoReload === true")
