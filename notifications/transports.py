"""The one seam around the outside world: a signed webhook POST, or an e-mail through
Django's mail backend. A failure is a TransportError, permanent (do not try again) or not.
What a receiver answered stays in the worker's log: the delivery records only the status
code and its standard reason."""

from __future__ import annotations

import json
import logging
import smtplib
import time
from http import HTTPStatus

import httpx
from django.conf import settings
from django.core.mail import EmailMessage

from . import links
from .events import absolute
from .policy import webhook_host_problem
from .signing import DELIVERY_HEADER, EVENT_HEADER, signed_headers

log = logging.getLogger(__name__)
USER_AGENT = "LoopConsole-Webhook/1"


class TransportError(Exception):
    def __init__(self, message: str, *, permanent: bool = False, code: int | None = None):
        super().__init__(message)
        self.permanent = permanent
        self.code = code


def send(subscription, delivery) -> int | None:
    if subscription.channel == subscription.Channel.WEBHOOK:
        return post_webhook(subscription, delivery)
    if subscription.channel == subscription.Channel.SLACK:
        from .slack import post_gate  # it raises this module's TransportError

        return post_gate(subscription, delivery)
    return send_email(subscription, delivery)


def body_of(delivery, decide: list[dict] | None = None) -> bytes:
    body = {**delivery.payload, "delivery": delivery.pk}
    if decide:
        body["decide"] = decide
    return json.dumps(body, separators=(",", ":")).encode()


def webhook_links(subscription, delivery) -> list[dict]:
    """The decision links a webhook carries: only for a subscription its person set up
    themselves (a link decides as them, so only they choose where it is sent), for a gate
    they may still decide (notifications.links)."""
    person = subscription.user
    own = person is not None and subscription.created_by_id == person.pk
    if not own or not delivery.gate_id or delivery.event not in links.LINKED_EVENTS:
        return []
    found = links.links_for(delivery.gate, person, delivery=delivery)
    return [
        {
            "decision": choice["id"],
            "label": choice["label"],
            "url": url,
            "as": person.get_username(),
        }
        for choice, url in found
    ]


def reason(code: int) -> str:
    try:
        return f"HTTP {code} {HTTPStatus(code).phrase}"
    except ValueError:
        return f"HTTP {code}"


def post_webhook(subscription, delivery) -> int:
    if problem := webhook_host_problem(subscription.url):
        raise TransportError(problem, permanent=True)
    body = body_of(delivery, webhook_links(subscription, delivery))
    headers = {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        EVENT_HEADER: delivery.event,
        DELIVERY_HEADER: str(delivery.pk),
        **signed_headers(subscription.secret, str(int(time.time())), body),
    }
    timeout = settings.LOOP_NOTIFY_TIMEOUT_SECONDS
    try:
        # Redirects are not followed: a redirect could lead past the host allow-list.
        response = httpx.post(
            subscription.url, content=body, headers=headers, timeout=timeout, follow_redirects=False
        )
    except httpx.TimeoutException:
        raise TransportError(f"no answer within {timeout} s") from None
    except httpx.HTTPError as exc:
        raise TransportError(f"could not connect ({type(exc).__name__})") from None
    code = response.status_code
    if 200 <= code < 300:
        return code
    log.warning(
        "webhook %s answered %s: %s", subscription.url, code, response.text[:500].replace("\n", " ")
    )
    if 300 <= code < 400:
        raise TransportError(
            f"{reason(code)} (redirects are not followed)", permanent=True, code=code
        )
    permanent = code < 500 and code not in (408, 425, 429)
    raise TransportError(reason(code), permanent=permanent, code=code)


def send_email(subscription, delivery) -> None:
    """A subscription's mail, or an escalation's (no subscription: to its recipient). A
    person who may operate gets their own decision links (notifications.links)."""
    person = subscription.user if subscription else delivery.recipient
    address = subscription.address if subscription else (person.email if person else "")
    if not address:
        raise TransportError("no e-mail address", permanent=True)
    payload = delivery.payload
    link = (payload.get("gate") or {}).get("url") or payload["run"]["url"]
    decide = ""
    # A link is the named person's credential: only ever sent to their own address.
    own = person is not None and address.lower() == (person.email or "").lower()
    if own and delivery.gate_id and delivery.event in links.LINKED_EVENTS:
        decide = links.mail_lines(delivery.gate, person, delivery=delivery)
    text = (
        f"{payload['summary']}\n\n"
        + (decide or "Deciding needs you to sign in and press a button on the page.\n\n")
        + f"Open it: {link}\n\n"
        f"— Loop Console ({absolute('/')})\n"
    )
    message = EmailMessage(
        subject=f"[Loop Console] {payload['summary'][:150]}",
        body=text,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[address],
    )
    try:
        message.send()
    except smtplib.SMTPRecipientsRefused:
        raise TransportError("the mail server refused the address", permanent=True) from None
    except (smtplib.SMTPException, OSError) as exc:
        raise TransportError(f"mail server: {type(exc).__name__}") from None
    return None
