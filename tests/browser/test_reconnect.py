"""A run page whose live connection drops catches up when the browser reconnects: an
event it never received (published while it was cut off) still reaches the page."""

from __future__ import annotations

import pytest
import redis
from django.conf import settings
from django.db import transaction
from playwright.sync_api import expect

from runs import live, live_hub, services
from runs.actor import Actor
from tests.browser.conftest import log_in
from tests.conftest import wait_for
from tests.console.conftest import gated_run, guided_run  # noqa: F401 - fixtures

pytestmark = pytest.mark.browser

SEEN = """() => {
  window.__ids = [];
  document.body.addEventListener("htmx:sseMessage", e => window.__ids.push(e.detail.lastEventId));
}"""


def cut_the_hub_off() -> int:
    """Close the web process's one Redis subscription (a lost Redis connection): every
    open stream of that process ends, and the browsers reconnect."""
    client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
    try:
        hubs = [c for c in client.client_list() if c.get("name") == live_hub.HUB_CLIENT_NAME]
        for hub in hubs:
            client.client_kill(hub["addr"])
        return len(hubs)
    finally:
        client.close()


@pytest.mark.skipif(not settings.LIVE_REDIS_URL, reason="the live stream runs on Redis here")
def test_a_dropped_stream_catches_up_by_last_event_id(
    live_worker,
    console_server,
    page,
    gated_run,  # noqa: F811
    operator,
    monkeypatch,
):
    run, gate = gated_run
    log_in(page, console_server, "otto")
    page.goto(console_server + run.get_absolute_url())
    expect(page.locator("#run-header")).to_contain_text("paused")
    page.evaluate(SEEN)
    # An event the page receives: from then on its EventSource has a Last-Event-ID.
    with transaction.atomic():
        run.append_event("note", "refine", text="seen by the page")
    wait_for(lambda: page.evaluate("window.__ids.length") > 0, message="the page's first event")
    seen = int(page.evaluate("window.__ids[window.__ids.length - 1]"))
    # The cancel is committed but its messages never reach the page: lost with the stream.
    monkeypatch.setattr(live, "publish_event", lambda *args, **kwargs: None)
    services.cancel_run(run, Actor.operator(operator, "console"))
    run.refresh_from_db()
    assert run.last_seq > seen
    assert cut_the_hub_off() >= 1
    # The browser reconnects with Last-Event-ID and the server sends what it missed.
    expect(page.locator("#run-header")).to_contain_text("cancelled")
    wait_for(
        lambda: int(page.evaluate("window.__ids[window.__ids.length - 1]")) == run.last_seq,
        message="the reconnected stream's id to reach the run's last event",
    )
