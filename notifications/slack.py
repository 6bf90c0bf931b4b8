"""Gates decided in Slack. A gate's notification to a Slack subscription is a message with
one button per offered decision (Block Kit); a press comes back to /slack/interactions/,
signed by Slack, and decides through `services.respond` as the presser's console account,
on the digest the message was posted with. Every message of the gate is then updated with
who decided what.

`call` is the one seam around Slack's Web API (slack_sdk's WebClient, whose base URL is
LOOP_SLACK_API_URL): its failures are TransportErrors, as a webhook's are."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.http import HttpResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.signature import SignatureVerifier

from runs import services
from runs.actor import Actor
from runs.errors import AlreadyDecided, ServiceError
from runs.models import Gate

from .events import gate_url
from .models import SLACK_REPLAY_SECONDS, SlackAction, SlackMessage, SlackUser
from .transports import TransportError, reason

log = logging.getLogger(__name__)

SIGNATURE_HEADER = "X-Slack-Signature"
TIMESTAMP_HEADER = "X-Slack-Request-Timestamp"
# Slack's error codes that another attempt will not mend: the token, the channel, the rights.
PERMANENT = frozenset(
    {
        "invalid_auth",
        "not_authed",
        "account_inactive",
        "token_revoked",
        "token_expired",
        "no_permission",
        "missing_scope",
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_blocks",
        "msg_too_long",
        "restricted_action",
    }
)
# A button's look by what its decision does (Slack has only these two).
STYLE = {"complete": "primary", "fail": "danger", "reject": "danger"}
NOTHING_DECIDED = "Nothing was decided."


# --- the Web API ---------------------------------------------------------------------------


def call(method: str, **arguments) -> dict:
    """One Web API method, named as slack_sdk's WebClient names it (`chat_postMessage`);
    the data Slack answered."""
    if not settings.LOOP_SLACK_BOT_TOKEN:
        raise TransportError("no Slack bot token (LOOP_SLACK_BOT_TOKEN)", permanent=True)
    client = WebClient(
        token=settings.LOOP_SLACK_BOT_TOKEN,
        # slack_sdk joins the method's name onto the base URL: it must end with a slash.
        base_url=settings.LOOP_SLACK_API_URL.rstrip("/") + "/",
        timeout=settings.LOOP_NOTIFY_TIMEOUT_SECONDS,
    )
    try:
        return getattr(client, method)(**arguments).data
    except SlackApiError as exc:
        code = exc.response.status_code
        error = str(exc.response.get("error") or "") if code == 200 else reason(code)
        permanent = error in PERMANENT
        raise TransportError(f"Slack: {error}", permanent=permanent, code=code) from None
    except (SlackClientError, OSError, ValueError) as exc:
        raise TransportError(f"Slack: could not connect ({type(exc).__name__})") from None


def escaped(text: str) -> str:
    """Text that Slack's mrkdwn shows as written (its three control characters escaped)."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# --- the message ---------------------------------------------------------------------------


def buttons(gate: Gate) -> dict:
    """One button per offered decision: its id is the action's, its value names the gate
    and the digest of what the message showed (a press decides on that digest)."""
    value = json.dumps({"gate": gate.pk, "digest": gate.digest}, separators=(",", ":"))
    elements = []
    for choice in gate.offered_decisions:
        button = {
            "type": "button",
            "action_id": choice["id"],
            "text": {"type": "plain_text", "text": choice["label"][:75]},
            "value": value,
        }
        if style := STYLE.get(choice["then"]):
            button["style"] = style
        elements.append(button)
    return {"type": "actions", "block_id": f"gate-{gate.pk}", "elements": elements}


def gate_blocks(summary: str, gate: Gate, *, note: str = "", still_open: bool = True) -> list:
    """The gate's message: what waits (and a link to its page), where, the note (who
    decided what) and, while it waits, the buttons."""
    where = f"Node {escaped(gate.node_id)}"
    if gate.iteration_id:
        where += f" · iteration {gate.iteration_number}"
    blocks = [
        {
            "type": "section",
            "text": {
                "type": "mrkdwn",
                "text": f"{escaped(summary)}\n<{gate_url(gate)}|Open the gate in Loop Console>",
            },
        },
        {"type": "context", "elements": [{"type": "mrkdwn", "text": where}]},
    ]
    if note:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": escaped(note)}})
    if still_open:
        blocks.append(buttons(gate))
    return blocks


def post_gate(subscription, delivery) -> None:
    """Post a delivery to its subscription's channel. A gate still waiting gets its buttons,
    and the message is kept (SlackMessage) to be updated once someone decides; any other
    event (a run's end, a gate decided meanwhile) is its sentence and a link."""
    payload = delivery.payload
    summary = payload["summary"]
    gate = delivery.gate
    if gate is None or not gate.is_pending:
        link = (payload.get("gate") or {}).get("url") or payload["run"]["url"]
        text = f"{escaped(summary)}\n<{link}|Open it in Loop Console>"
        call("chat_postMessage", channel=subscription.slack_channel, text=text, unfurl_links=False)
        return None
    posted = call(
        "chat_postMessage",
        channel=subscription.slack_channel,
        text=escaped(summary),  # what a notification shows where blocks do not
        blocks=gate_blocks(summary, gate),
        unfurl_links=False,
    )
    SlackMessage.objects.create(
        gate=gate, delivery=delivery, channel=posted["channel"], ts=posted["ts"], summary=summary
    )
    return None


def label_of(gate: Gate) -> str:
    answered = gate.answered_id()
    for choice in gate.offered_decisions:
        if choice["id"] == answered:
            return choice["label"]
    return gate.get_status_display()


def decided_note(gate: Gate) -> str:
    if gate.status in (Gate.Status.CANCELLED, Gate.Status.TIMED_OUT):
        by = f" ({gate.decider})" if gate.decider else ""
        return f"This gate ended: {gate.get_status_display().lower()}{by}."
    return f"{gate.decider} decided {label_of(gate)}"


def quorum_note(gate: Gate) -> str:
    names = gate.responses.filter(closed_gate=False).values_list("by_name", flat=True)
    who = ", ".join(dict.fromkeys(names))
    return f"{who} approved ({gate.approvals_given()} of {gate.approvals_needed})"


def update_messages(gate: Gate, note: str, *, still_open: bool = False) -> None:
    """Every message of the gate, with the note and (only while it waits) the buttons. A
    Slack that fails here leaves the decision as it is: it is logged."""
    for message in SlackMessage.objects.filter(gate=gate):
        try:
            call(
                "chat_update",
                channel=message.channel,
                ts=message.ts,
                text=escaped(f"{message.summary} {note}"),
                blocks=gate_blocks(message.summary, gate, note=note, still_open=still_open),
            )
        except TransportError as exc:
            log.warning(
                "could not update Slack message %s of gate %s: %s", message.ts, gate.pk, exc
            )


# --- a press of a button ---------------------------------------------------------------------


@dataclass(frozen=True)
class Press:
    """One press of a gate message's button, as Slack's `block_actions` payload gives it."""

    user_id: str
    team_id: str
    channel: str
    message_ts: str
    action_ts: str
    decision: str
    gate_id: int
    digest: str

    @property
    def key(self) -> str:
        """What a replay of the same request repeats (SlackAction)."""
        return f"{self.team_id}:{self.user_id}:{self.action_ts}"

    @classmethod
    def parse(cls, raw: str) -> Press:
        try:
            payload = json.loads(raw)
            if payload["type"] != "block_actions":
                raise ValueError(payload["type"])
            action = payload["actions"][0]
            value = json.loads(action["value"])
            container = payload.get("container") or {}
            user = payload["user"]
            return cls(
                user_id=str(user["id"]),
                team_id=str((payload.get("team") or {}).get("id") or user.get("team_id") or ""),
                channel=str(container.get("channel_id") or payload["channel"]["id"]),
                message_ts=str(container.get("message_ts") or payload["message"]["ts"]),
                action_ts=str(action["action_ts"]),
                decision=str(action["action_id"]),
                gate_id=int(value["gate"]),
                digest=str(value.get("digest") or ""),
            )
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise ValueError("This is no press of a button this console posted.") from None


def signature_problem(request) -> str | None:
    """Why a request does not prove it is Slack's, or None. SignatureVerifier checks the
    HMAC (v0) of the timestamp and the body and refuses a timestamp more than five minutes
    off; the age is looked at first only to say which."""
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    if not (timestamp.isascii() and timestamp.isdigit()):
        return "The request carries no timestamp."
    if abs(time.time() - int(timestamp)) > SLACK_REPLAY_SECONDS:
        return "The request is more than five minutes old."
    signature = request.headers.get(SIGNATURE_HEADER, "")
    verifier = SignatureVerifier(settings.LOOP_SLACK_SIGNING_SECRET)
    try:
        valid = verifier.is_valid(request.body, timestamp, signature)
    except UnicodeDecodeError:
        valid = False
    return None if valid else "The request's signature is not Slack's."


def console_user(press: Press):
    """(the presser's console account, "") or (None, why not): an explicit SlackUser link
    first, else the one active account with the e-mail of their Slack profile."""
    user = SlackUser.objects.console_user(press.user_id, press.team_id)
    if user is not None:
        return user, ""
    try:
        found = call("users_info", user=press.user_id)
    except TransportError as exc:
        return None, f"Slack did not say who you are ({exc})."
    email = ((found.get("user") or {}).get("profile") or {}).get("email") or ""
    accounts = get_user_model().objects.filter(email__iexact=email, is_active=True)
    matches = list(accounts[:2]) if email else []
    if len(matches) != 1:
        return None, (
            "No console account is linked to your Slack account or has its e-mail address; "
            "ask an administrator to link yours."
        )
    return matches[0], ""


def decide_press(press: Press) -> str:
    """Decide as the presser's console account; what to tell them."""
    message = (
        SlackMessage.objects.filter(
            gate_id=press.gate_id, channel=press.channel, ts=press.message_ts
        )
        .select_related("gate__iteration", "gate__run")
        .first()
    )
    if message is None:
        return f"This console posted no such message. {NOTHING_DECIDED}"
    gate = message.gate
    user, problem = console_user(press)
    if user is None:
        return f"{problem} {NOTHING_DECIDED}"
    # The role in this run's project (console.projects), as `respond` asks it again.
    if not user.has_perm("runs.operate_run", gate.run):
        return (
            f"{user.get_username()} does not hold the operator role in this run's project. "
            f"{NOTHING_DECIDED}"
        )
    actor = Actor.operator(user, "slack")
    chosen = {choice["id"]: choice for choice in gate.offered_decisions}.get(press.decision)
    if chosen and chosen["text_required"]:
        return f"“{chosen['label']}” needs a text: decide it in the console, {gate_url(gate)}"
    try:
        gate = services.respond(gate.pk, actor, press.decision, digest=press.digest)
    except AlreadyDecided as exc:
        update_messages(exc.gate, decided_note(exc.gate))
        return str(exc)
    except ServiceError as exc:
        return f"{exc} {NOTHING_DECIDED} The gate: {gate_url(gate)}"
    if gate.is_pending:
        update_messages(gate, quorum_note(gate), still_open=True)
        return f"Your approval counts: {gate.approvals_given()} of {gate.approvals_needed}."
    update_messages(gate, decided_note(gate))
    return f"You decided {label_of(gate)}."


def tell(press: Press, text: str) -> None:
    """Say `text` to the presser alone (an ephemeral message in the channel)."""
    try:
        call("chat_postEphemeral", channel=press.channel, user=press.user_id, text=escaped(text))
    except TransportError as exc:
        log.warning("could not answer Slack user %s: %s", press.user_id, exc)


def plain(text: str, status: int = 200) -> HttpResponse:
    return HttpResponse(text, status=status, content_type="text/plain; charset=utf-8")


def handle_interaction(request) -> HttpResponse:
    """Slack's interactivity request: proven by its signature (else 401), each press once
    (a replay is answered and does nothing), decided as the presser, who is told how it
    went. Slack shows nothing of the HTTP answer; it is for logs and tests."""
    if not settings.LOOP_SLACK_SIGNING_SECRET:
        return plain("Slack is not set up here (LOOP_SLACK_SIGNING_SECRET).", 403)
    if problem := signature_problem(request):
        return plain(problem, 401)
    try:
        press = Press.parse(request.POST.get("payload", ""))
    except ValueError as exc:
        return plain(str(exc), 400)
    if not SlackAction.first_time(press.key):
        return plain(f"This press was handled already. {NOTHING_DECIDED}")
    answer = decide_press(press)
    tell(press, answer)
    return plain(answer)
