"""A real SMTP server on 127.0.0.1 (aiosmtpd) in the test's process, and Django's SMTP
backend pointed at it: what the console mails arrives here as parsed messages."""

from __future__ import annotations

import email
import email.policy
import logging
import re
import threading
from urllib.parse import urlsplit

import pytest

from tests.conftest import _free_port, wait_for


class Inbox:
    """aiosmtpd's handler: every message the server accepted, parsed."""

    def __init__(self):
        self.messages = []
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
        message = email.message_from_bytes(envelope.content, policy=email.policy.default)
        with self.lock:
            self.messages.append(message)
        return "250 Message accepted for delivery"

    def to(self, address: str) -> list:
        with self.lock:
            return [m for m in self.messages if address in m["To"]]

    def text_to(self, address: str) -> str:
        """The plain text of the last message to `address` (waiting for one)."""
        message = wait_for(lambda: self.to(address), message=f"a mail to {address}")[-1]
        return message.get_body(preferencelist=("plain",)).get_content()

    def links_to(self, address: str) -> dict[str, str]:
        """The decision links of the last message to `address`: {label: URL}."""
        found = re.findall(
            r"^  (\w[^:\n]*): (http\S+/decide/[^/\s]+/)", self.text_to(address), re.MULTILINE
        )
        return dict(found)

    def paths_to(self, address: str) -> dict[str, str]:
        return {label: urlsplit(url).path for label, url in self.links_to(address).items()}


@pytest.fixture(name="mailbox")
def mailbox_fixture(settings):
    """The messages a real SMTP server on 127.0.0.1 received (an `Inbox`); a test file
    imports `mailbox_fixture` to use `mailbox`."""
    from aiosmtpd.controller import Controller

    logging.getLogger("mail.log").setLevel(logging.WARNING)  # aiosmtpd logs every command
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT = "127.0.0.1", controller.port
    settings.EMAIL_USE_TLS = settings.EMAIL_USE_SSL = False
    yield inbox
    controller.stop()
