"""Gates decided in Slack, against a scripted Slack Web API on 127.0.0.1 (this file starts
it; the console reaches it through LOOP_SLACK_API_URL) and interaction payloads signed here
with the signing secret, as Slack signs them (HMAC-SHA256, version v0, over
`v0:<timestamp>:<body>`). A press decides once, as the console account the Slack user
maps to, and the message then says who decided what; replays, bad signatures, old
timestamps and unknown people are refused and decide nothing."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from notifications.models import Delivery, SlackMessage, SlackUser, Subscription
from runs import services
from runs.actor import ENGINE
from runs.models import GateResponse

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "xoxb-test-token"
SIGNING_SECRET = "slack-signing-secret-for-tests"
CHANNEL = "C0GATES"
TEAM = "T0TEAM"

DECLARED = """
name: ship-it
nodes:
  - id: ship
    approval:
      message: Ship it?
      decisions:
        - {id: ship, label: Ship}
        - {id: hold, label: Hold}
"""


class SlackApi:
    """Slack's Web API as far as the console uses it: it checks the bot token, records
    each call and answers as Slack does. `directory` is users.info's: user id -> e-mail."""

    def __init__(self, directory: dict[str, str] | None = None):
        self.directory = directory or {}
        self.calls: list[dict] = []
        self.posted = 0
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # http.server's name
                self.answer(dict(parse_qsl(urlsplit(self.path).query)))

            def do_POST(self):  # http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Type", "").startswith("application/json"):
                    self.answer(json.loads(body or b"{}"))
                else:
                    self.answer(
                        {
                            **dict(parse_qsl(urlsplit(self.path).query)),
                            **dict(parse_qsl(body.decode())),
                        }
                    )

            def answer(self, arguments):
                method = urlsplit(self.path).path.rsplit("/", 1)[-1]
                authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
                data = (
                    api.reply(method, arguments)
                    if authorized
                    else {"ok": False, "error": "invalid_auth"}
                )
                api.calls.append({"method": method, "args": arguments})
                encoded = json.dumps(data).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(encoded)))
                self.end_headers()
                self.wfile.write(encoded)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/api/"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def reply(self, method: str, arguments: dict) -> dict:
        if method == "chat.postMessage":
            self.posted += 1
            ts = f"1700000000.{self.posted:06d}"
            return {"ok": True, "channel": arguments["channel"], "ts": ts}
        if method == "chat.update":
            return {"ok": True, "channel": arguments["channel"], "ts": arguments["ts"]}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": "1700000001.000001"}
        if method == "users.info":
            email = self.directory.get(arguments.get("user"))
            if email is None:
                return {"ok": False, "error": "user_not_found"}
            return {"ok": True, "user": {"id": arguments["user"], "profile": {"email": email}}}
        return {"ok": False, "error": "unknown_method"}

    def called(self, method: str) -> list[dict]:
        return [call["args"] for call in self.calls if call["method"] == method]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def slack(settings):
    with SlackApi() as api:
        settings.LOOP_SLACK_API_URL = api.url
        settings.LOOP_SLACK_BOT_TOKEN = TOKEN
        settings.LOOP_SLACK_SIGNING_SECRET = SIGNING_SECRET
        yield api


@pytest.fixture
def posted(slack, make_recipe, in_process):
    """A run waiting at its gate, announced to the channel: (run, gate, the posted blocks)."""
    Subscription.objects.create(name="release channel", channel="slack", slack_channel=CHANNEL)
    run = services.start_run(make_recipe(DECLARED, "ship-it"), ENGINE, message="v2")
    in_process()
    gate = services.pending_gate(run)
    assert gate is not None and gate.digest
    [message] = slack.called("chat.postMessage")
    return run, gate, message["blocks"]


def buttons_of(blocks: list) -> list[dict]:
    return [
        element for block in blocks if block["type"] == "actions" for element in block["elements"]
    ]


def signed(body: str, timestamp: int, secret: str = SIGNING_SECRET) -> dict:
    base = f"v0:{timestamp}:{body}".encode()
    signature = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {"X-Slack-Request-Timestamp": str(timestamp), "X-Slack-Signature": signature}


def press_body(button: dict, user: str = "U0OTTO", action_ts: str = "1700000100.000100") -> str:
    """Slack's block_actions payload for a press of `button` in the posted message."""
    payload = {
        "type": "block_actions",
        "team": {"id": TEAM, "domain": "example"},
        "user": {"id": user, "username": "someone", "team_id": TEAM},
        "api_app_id": "A0LOOP",
        "container": {"type": "message", "message_ts": "1700000000.000001", "channel_id": CHANNEL},
        "channel": {"id": CHANNEL, "name": "releases"},
        "message": {"ts": "1700000000.000001", "type": "message"},
        "response_url": "https://hooks.example.invalid/actions/T0TEAM/1/abc",
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "gate",
                "text": button["text"],
                "value": button["value"],
                "action_ts": action_ts,
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)})


def press(client, body: str, timestamp: int | None = None, secret: str = SIGNING_SECRET):
    timestamp = int(time.time()) if timestamp is None else timestamp
    return client.post(
        "/slack/interactions/",
        data=body,
        content_type="application/x-www-form-urlencoded",
        headers=signed(body, timestamp, secret),
    )


def button(blocks, decision: str) -> dict:
    return next(b for b in buttons_of(blocks) if b["action_id"] == decision)


def nothing_decided(gate) -> bool:
    gate.refresh_from_db()
    return gate.is_pending and not GateResponse.objects.filter(gate=gate).exists()


def test_a_waiting_gate_is_posted_with_one_button_per_decision(posted, slack):
    run, gate, blocks = posted
    assert [b["action_id"] for b in buttons_of(blocks)] == ["ship", "hold", "reject"]
    assert [b["text"]["text"] for b in buttons_of(blocks)] == ["Ship", "Hold", "Reject"]
    assert [d["id"] for d in gate.offered_decisions] == ["ship", "hold", "reject"]
    values = {json.loads(b["value"])["gate"] for b in buttons_of(blocks)}
    assert values == {gate.pk}
    assert json.loads(buttons_of(blocks)[0]["value"])["digest"] == gate.digest
    text = json.dumps(blocks)
    assert f"Run {run.pk} (ship-it) waits for a decision at ship." in text
    assert f"/runs/{run.pk}/gates/{gate.pk}/" in text and "Node ship" in text
    [message] = SlackMessage.objects.all()
    assert (message.gate_id, message.channel, message.ts) == (gate.pk, CHANNEL, "1700000000.000001")
    assert Delivery.objects.get().status == "delivered"


def test_a_signed_press_decides_once_and_the_message_says_who(
    posted, slack, client, operator, in_process
):
    run, gate, blocks = posted
    operator.email = "Otto@Example.com"
    operator.save()
    slack.directory["U0OTTO"] = "otto@example.com"  # mapped by e-mail, whatever its case
    body = press_body(button(blocks, "ship"))
    response = press(client, body)
    assert response.status_code == 200, response.content
    assert response.content.decode() == "You decided Ship."
    gate.refresh_from_db()
    assert (gate.status, gate.decision, gate.decided_by, gate.surface) == (
        "accepted",
        "ship",
        operator,
        "slack",
    )
    [answer] = GateResponse.objects.filter(gate=gate)
    assert (answer.by, answer.via, answer.digest, answer.decision) == (
        operator,
        "slack",
        gate.digest,
        "ship",
    )
    [update] = slack.called("chat.update")
    assert (update["channel"], update["ts"]) == (CHANNEL, "1700000000.000001")
    assert buttons_of(update["blocks"]) == []
    assert "otto decided Ship" in json.dumps(update["blocks"])
    [told] = slack.called("chat.postEphemeral")
    assert (told["user"], told["text"]) == ("U0OTTO", "You decided Ship.")
    in_process()
    run.refresh_from_db()
    assert run.status == "completed"

    replay = press(client, body)  # the same signed request, within its five minutes
    assert replay.status_code == 200
    assert "handled already" in replay.content.decode()
    assert GateResponse.objects.filter(gate=gate).count() == 1
    assert len(slack.called("chat.update")) == 1
    assert len(slack.called("chat.postEphemeral")) == 1


def test_an_explicit_link_maps_the_slack_user_without_asking_slack(posted, slack, client, operator):
    _, gate, blocks = posted
    SlackUser.objects.create(user=operator, slack_user_id="U0LINKED", team_id=TEAM)
    response = press(client, press_body(button(blocks, "hold"), user="U0LINKED"))
    assert response.content.decode() == "You decided Hold."
    gate.refresh_from_db()
    assert (gate.decision, gate.decided_by) == ("hold", operator)
    assert slack.called("users.info") == []
    assert "otto decided Hold" in json.dumps(slack.called("chat.update")[0]["blocks"])


def test_a_bad_signature_and_an_old_timestamp_are_refused(posted, slack, client, operator):
    _, gate, blocks = posted
    SlackUser.objects.create(user=operator, slack_user_id="U0OTTO")
    body = press_body(button(blocks, "ship"))
    forged = press(client, body, secret="not-the-secret")
    assert forged.status_code == 401
    assert "signature" in forged.content.decode()
    old = press(client, body, timestamp=int(time.time()) - 6 * 60)  # signed well, but stale
    assert old.status_code == 401
    assert "five minutes" in old.content.decode()
    unsigned = client.post(
        "/slack/interactions/", data=body, content_type="application/x-www-form-urlencoded"
    )
    assert unsigned.status_code == 401
    assert nothing_decided(gate)
    assert [call["method"] for call in slack.calls] == ["chat.postMessage"]  # nothing more
    assert client.get("/slack/interactions/").status_code == 405


def test_unknown_people_and_people_without_the_operator_role_decide_nothing(
    posted, slack, client, viewer
):
    _, gate, blocks = posted
    slack.directory["U0STRANGER"] = "stranger@example.com"  # no console account has it
    response = press(client, press_body(button(blocks, "ship"), user="U0STRANGER"))
    assert response.status_code == 200
    assert "No console account" in response.content.decode()
    assert "Nothing was decided." in response.content.decode()
    response = press(client, press_body(button(blocks, "ship"), user="U0NOBODY", action_ts="2.0"))
    assert "Slack did not say who you are" in response.content.decode()  # users.info: no
    SlackUser.objects.create(user=viewer, slack_user_id="U0VERA")
    response = press(client, press_body(button(blocks, "ship"), user="U0VERA", action_ts="3.0"))
    assert "vera does not hold the operator role" in response.content.decode()
    assert nothing_decided(gate)
    assert slack.called("chat.update") == []
    told = [answer["user"] for answer in slack.called("chat.postEphemeral")]
    assert told == ["U0STRANGER", "U0NOBODY", "U0VERA"]


def test_a_decision_that_needs_a_text_is_sent_to_the_console(posted, slack, client, operator):
    _, gate, blocks = posted
    SlackUser.objects.create(user=operator, slack_user_id="U0OTTO")
    response = press(client, press_body(button(blocks, "reject")))
    answer = response.content.decode()
    assert answer.startswith("“Reject” needs a text: decide it in the console")
    assert f"/runs/{gate.run_id}/gates/{gate.pk}/" in answer
    assert nothing_decided(gate)


def test_a_press_on_content_that_changed_since_is_refused(
    posted, slack, client, operator, settings
):
    run, gate, blocks = posted
    SlackUser.objects.create(user=operator, slack_user_id="U0OTTO")
    artifacts = Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    (artifacts / "report.md").write_text("written after the message was posted\n")
    response = press(client, press_body(button(blocks, "ship")))
    answer = response.content.decode()
    assert "changed" in answer and "report.md" in answer and "Nothing was decided." in answer
    assert nothing_decided(gate)


def test_a_quorum_still_short_keeps_the_buttons_and_counts(
    slack, make_recipe, in_process, client, operator, django_user_model
):
    from tests.conftest import make_user

    second = make_user(django_user_model, "olga", "operator")
    SlackUser.objects.create(user=operator, slack_user_id="U0OTTO")
    SlackUser.objects.create(user=second, slack_user_id="U0OLGA")
    Subscription.objects.create(name="release channel", channel="slack", slack_channel=CHANNEL)
    source = DECLARED.replace("      decisions:", "      approvals: 2\n      decisions:")
    run = services.start_run(make_recipe(source, "ship-it"), ENGINE, message="v2")
    in_process()
    gate = services.pending_gate(run)
    blocks = slack.called("chat.postMessage")[0]["blocks"]
    first = press(client, press_body(button(blocks, "ship")))
    assert first.content.decode() == "Your approval counts: 1 of 2."
    update = slack.called("chat.update")[-1]
    assert "otto approved (1 of 2)" in json.dumps(update["blocks"])
    assert len(buttons_of(update["blocks"])) == 3
    again = press(client, press_body(button(blocks, "ship"), action_ts="5.0"))
    assert "already approved" in again.content.decode()
    done = press(client, press_body(button(blocks, "ship"), user="U0OLGA", action_ts="6.0"))
    assert done.content.decode() == "You decided Ship."
    gate.refresh_from_db()
    assert gate.status == "accepted"
    last = slack.called("chat.update")[-1]
    assert buttons_of(last["blocks"]) == [] and "olga decided Ship" in json.dumps(last["blocks"])


def test_the_admin_links_slack_users_and_a_slack_subscription_needs_a_channel(client, admin_user):
    from django.core.exceptions import ValidationError

    client.force_login(admin_user)
    page = client.get("/admin/notifications/slackuser/add/")
    assert page.status_code == 200 and b"Slack member ID" in page.content
    page = client.get("/admin/notifications/subscription/add/")
    assert page.status_code == 200 and b'name="slack_channel"' in page.content
    with pytest.raises(ValidationError) as refused:
        Subscription(name="no channel", channel="slack").full_clean()
    assert "slack_channel" in refused.value.message_dict
