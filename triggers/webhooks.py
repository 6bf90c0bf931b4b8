"""Inbound webhooks: a signed delivery to `/hooks/<key>` starts a run of the webhook's
recipe. `receive` asks the rules in this order, and the first that refuses answers
(docs/api.md, "Webhooks", lists every answer):

unknown key 404 · over the webhook's rate 429 · body over LOOP_WEBHOOK_MAX_BYTES 413 ·
disabled 403 · signature missing, wrong or too old 401 · no delivery id 400 · a delivery id
that started a run already 200 · not a JSON object 400 · an event or a field the webhook
does not take 202 · inputs the body does not give, or the recipe refuses, 422 · the recipe
cannot start 409 · started 201.

Every request to a webhook that exists leaves one `WebhookDelivery` (its status, outcome and
why; never its body), but one over the rate, which is only logged: the rate bounds the rows
anyone who knows the URL can add. What the body gives the run is data: values picked by JSON pointers
(RFC 6901) are handed to `services.start_run` as inputs and message, which the recipe's
kind treats like any person's (a value never becomes code), and never an input the recipe
runs as a whole command.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import IntegrityError, transaction

from console.throttle import spend
from notifications import signing
from runs import kinds, services
from runs.actor import Actor

from .models import Webhook, WebhookDelivery

log = logging.getLogger(__name__)

GITHUB_SIGNATURE_HEADER = "X-Hub-Signature-256"
# What a webhook's header fields hold until someone changes them: GitHub's names. A generic
# webhook left with them reads the Loop Console's own (notifications/signing.py).
GITHUB_EVENT_HEADER = Webhook._meta.get_field("event_header").default
GITHUB_DELIVERY_HEADER = Webhook._meta.get_field("delivery_header").default
# GitHub sends this when a webhook is made there: it never starts a run.
GITHUB_PING = "ping"
# The events of a trigger kind that names none of its own (a recipe's `trigger.kind`).
KIND_EVENTS = {
    "pr_feedback": ["pull_request_review", "pull_request_review_comment"],
    "ci_failure": ["check_suite", "workflow_run"],
}
DELIVERY_ID_LIMIT = WebhookDelivery._meta.get_field("delivery_id").max_length
EVENT_LIMIT = WebhookDelivery._meta.get_field("event").max_length
NOTE_LIMIT = 2000
MISSING = object()
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class Answer:
    """What the console answers a delivery: `run` is the run's id it started (201) or had
    started (200); `errors` per input (422); `retry_after` seconds (429)."""

    status: int
    detail: str
    run: int | None = None
    errors: dict = field(default_factory=dict)
    retry_after: int = 0

    @property
    def outcome(self) -> str:
        return {201: "started", 200: "duplicate", 202: "ignored"}.get(self.status, "refused")

    def body(self) -> dict:
        body: dict = {"detail": self.detail}
        if self.run is not None:
            body["run"] = self.run
        if self.status == 201:
            from django.urls import reverse

            body["url"] = reverse("run_detail", args=[self.run])
        if self.errors:
            body["errors"] = self.errors
        return body

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)} if self.retry_after else {}


@dataclass(frozen=True)
class Sent:
    """What a delivery's headers say it is."""

    event: str
    delivery_id: str


def actor(webhook: Webhook) -> Actor:
    """Who a webhook's runs are started by, as every page names it."""
    # Whoever sent the delivery holds no rights here.
    return Actor("webhook", label=f"webhook '{webhook.name}'", acting_for=AnonymousUser())


# --- the rules, in order --------------------------------------------------------------------


def receive(key: str, headers: Mapping[str, str], body: bytes) -> Answer:
    """A delivery to `/hooks/<key>`: `body` is what the view read (at most the limit and one
    byte more; nothing when the declared length was over it)."""
    webhook = Webhook.objects.select_related("recipe").filter(key=key).first()
    if webhook is None:
        log.info("webhook delivery to an unknown key (%s…): 404", key[:4])
        return Answer(404, "No such webhook.")
    headers = {name.lower(): value for name, value in headers.items()}
    sent = Sent(
        event=headers.get(event_header(webhook).lower(), ""),
        delivery_id=headers.get(delivery_header(webhook).lower(), ""),
    )
    answer = _accept(webhook, headers, body, sent)
    # A started delivery is recorded with its run (`start`); one over the rate only in the
    # log: the rate bounds how many rows anyone who knows the URL can write.
    if answer.status == 429:
        log.info("webhook %s: over %s deliveries a minute: 429", webhook.pk, webhook.per_minute)
    elif answer.status != 201:
        _record(webhook, sent, answer)
    return answer


def _accept(webhook: Webhook, headers: dict, body: bytes, sent: Sent) -> Answer:
    early = _answer_before_reading(webhook, headers, body, sent)
    if early is not None:
        return early
    payload = json_object(body)
    if payload is None:
        return Answer(400, "The body is not a JSON object (send it as application/json).")
    plan = Plan.of(webhook, sent.event)
    why = plan.ignores(webhook, sent.event, payload)
    if why:
        return Answer(202, f"Ignored: {why}.")
    inputs, message, errors = plan.values(webhook, payload)
    if errors:
        return Answer(422, "The delivery does not give the run's inputs.", errors=errors)
    return start(webhook, sent, inputs, message)


def _answer_before_reading(webhook, headers: dict, body: bytes, sent: Sent) -> Answer | None:
    """The answers given before the body is read, in order; None: read it."""
    wait = spend(f"webhook:{webhook.key}", webhook.per_minute, window=60)
    if wait:
        return Answer(
            429,
            f"More than {webhook.per_minute} deliveries a minute: retry in {wait} s.",
            retry_after=wait,
        )
    limit = settings.LOOP_WEBHOOK_MAX_BYTES
    if too_large(headers, body):
        return Answer(413, f"The body is larger than {limit:,} bytes.")
    if not webhook.enabled:
        return Answer(403, "This webhook is disabled.")
    problem = signature_problem(webhook, headers, body)
    if problem:
        return Answer(401, problem)
    if not sent.delivery_id or len(sent.delivery_id) > DELIVERY_ID_LIMIT:
        return Answer(
            400,
            f"A delivery needs its id (at most {DELIVERY_ID_LIMIT} characters) in "
            f"{delivery_header(webhook)}: a delivery sent twice starts one run.",
        )
    return _duplicate(webhook, sent)


def _duplicate(webhook: Webhook, sent: Sent) -> Answer | None:
    """The answer to a delivery whose id started a run already (None: it did not)."""
    started = WebhookDelivery.objects.filter(
        webhook=webhook, delivery_id=sent.delivery_id, outcome=WebhookDelivery.Outcome.STARTED
    ).first()
    if started is None:
        return None
    if started.run_id is None:  # the run was deleted since
        return Answer(200, "Already delivered.")
    return Answer(200, f"Already delivered: run {started.run_id}.", run=started.run_id)


# --- size, signature, headers ---------------------------------------------------------------


def declared_length(headers: Mapping[str, str]) -> int:
    """The Content-Length a request declares (0 when it declares none or nonsense)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    try:
        return max(0, int(lowered.get("content-length") or 0))
    except ValueError:
        return 0


def too_large(headers: Mapping[str, str], body: bytes) -> bool:
    """Over LOOP_WEBHOOK_MAX_BYTES, by what it declares or by what was read."""
    limit = settings.LOOP_WEBHOOK_MAX_BYTES
    return declared_length(headers) > limit or len(body) > limit


def signature_problem(
    webhook: Webhook, headers: dict, body: bytes, now: float | None = None
) -> str:
    """Why the delivery is not signed with the webhook's secret ("" when it is). The
    digests are compared in constant time; a generic delivery's timestamp is checked only
    once its signature holds, so only the sender learns its clock is off."""
    secret = webhook.secret
    if webhook.signature == Webhook.Signature.GITHUB:
        given = headers.get(GITHUB_SIGNATURE_HEADER.lower(), "")
        if not given:
            return f"No signature: send {GITHUB_SIGNATURE_HEADER} (give the sender the secret)."
        mac = hmac.new(secret.encode(), body, hashlib.sha256)
        return "" if _same(given, "sha256=" + mac.hexdigest()) else _MISMATCH
    given = headers.get(signing.SIGNATURE_HEADER.lower(), "")
    stamp = headers.get(signing.TIMESTAMP_HEADER.lower(), "")
    if not given or not stamp:
        return f"No signature: send {signing.SIGNATURE_HEADER} and {signing.TIMESTAMP_HEADER}."
    if not _same(given, signing.signature(secret, stamp, body)):
        return _MISMATCH
    tolerance = settings.LOOP_WEBHOOK_TOLERANCE_SECONDS
    try:
        off = abs((time.time() if now is None else now) - int(stamp))
    except ValueError:
        return f"{signing.TIMESTAMP_HEADER} is not a Unix time in seconds."
    if off > tolerance:
        return (
            f"The delivery is too old (or from the future): its timestamp is {int(off)} s "
            f"from the console's clock, more than {tolerance} s."
        )
    return ""


_MISMATCH = "The signature does not match the body (check the webhook's secret)."


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())


def event_header(webhook: Webhook) -> str:
    if webhook.signature == Webhook.Signature.GENERIC and (
        webhook.event_header == GITHUB_EVENT_HEADER
    ):
        return signing.EVENT_HEADER
    return webhook.event_header


def delivery_header(webhook: Webhook) -> str:
    if webhook.signature == Webhook.Signature.GENERIC and (
        webhook.delivery_header == GITHUB_DELIVERY_HEADER
    ):
        return signing.DELIVERY_HEADER
    return webhook.delivery_header


# --- the body --------------------------------------------------------------------------------


def json_object(body: bytes) -> dict | None:
    try:
        payload = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return payload if isinstance(payload, dict) else None


def resolve(document, pointer: str):
    """The value a JSON pointer (RFC 6901) names in `document`, or MISSING."""
    if pointer == "":
        return document
    if not pointer.startswith("/"):
        return MISSING
    value = document
    for token in pointer[1:].split("/"):
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and _ARRAY_INDEX.fullmatch(token) and int(token) < len(value):
            value = value[int(token)]
        else:
            return MISSING
    return value


def single_value(document, pointer: str) -> tuple[object, str]:
    """(value, "") for a string, number, boolean or null at `pointer`; (None, why) else."""
    value = resolve(document, pointer)
    if value is MISSING:
        return None, f"the delivery has no {pointer}"
    if isinstance(value, dict | list):
        return None, f"{pointer} is not a single value"
    return value, ""


def matches(value, allowed) -> bool:
    """Whether a body's value is the allowed one, or one of them (true is not 1)."""
    for choice in allowed if isinstance(allowed, list) else [allowed]:
        if isinstance(value, bool) == isinstance(choice, bool) and value == choice:
            return True
    return False


def as_input(value, input_type: str | None):
    """A body's value as an input of `input_type` takes it: numbers and booleans as they
    are (start_run checks them), JSON's spelling of them for every text-like input."""
    if input_type in ("number", "boolean") or value is None or isinstance(value, str):
        return value
    return json.dumps(value)


# --- what the webhook takes and gives ----------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """A webhook's events, filters and inputs: its own, else its recipe's declared trigger's
    (`LoopKind.declared_trigger`), else the trigger kind's (KIND_EVENTS, `kind_filters`)."""

    events: list
    filters: dict
    inputs: dict
    input_types: dict
    command_inputs: frozenset = frozenset()
    message_is_command: bool = False

    @classmethod
    def of(cls, webhook: Webhook, event: str) -> Plan:
        spec = recipe_spec(webhook.recipe)
        declared = declared_trigger(webhook.recipe, spec)
        kind = declared.get("kind", "")
        declared_inputs = getattr(spec, "inputs", None) or {}
        return cls(
            events=list(webhook.events or declared.get("events") or KIND_EVENTS.get(kind, [])),
            filters=dict(webhook.filters or declared.get("filters") or kind_filters(kind, event)),
            inputs=dict(webhook.inputs or declared.get("inputs") or {}),
            input_types={name: spec_input.type for name, spec_input in declared_inputs.items()},
            command_inputs=frozenset(declared.get("command_inputs", ())),
            message_is_command=bool(declared.get("message_is_command")),
        )

    def ignores(self, webhook: Webhook, event: str, payload: dict) -> str:
        """Why the delivery starts nothing though nothing is wrong with it ("": it starts)."""
        if webhook.signature == Webhook.Signature.GITHUB and event == GITHUB_PING:
            return "GitHub's ping (the webhook is reached and its signature holds)"
        if self.events and event not in self.events:
            taken = ", ".join(self.events)
            return f"event {event!r} is not one this webhook takes ({taken})"
        for pointer, allowed in self.filters.items():
            value = resolve(payload, pointer)
            if value is MISSING:
                return f"the delivery has no {pointer}"
            if not matches(value, allowed):
                choices = allowed if isinstance(allowed, list) else [allowed]
                wanted = " or ".join(json.dumps(choice) for choice in choices)
                return f"{pointer} is {json.dumps(value)[:100]}, not {wanted}"
        return ""

    def values(self, webhook: Webhook, payload: dict) -> tuple[dict, str, dict]:
        """(inputs, message, errors) the body gives the run."""
        inputs, errors = {}, {}
        for name, pointer in self.inputs.items():
            value, problem = single_value(payload, pointer)
            if name in self.command_inputs:
                problem = "the recipe runs this input as a command: a delivery never fills it"
            if problem:
                errors[name] = problem
            else:
                inputs[name] = as_input(value, self.input_types.get(name))
        message = webhook.message
        if message.startswith("/"):
            value, problem = single_value(payload, message)
            if self.message_is_command:
                problem = "the recipe runs the message as a command: a delivery never gives it"
            if problem:
                errors["message"] = problem
            message = "" if value is None else str(as_input(value, None))
        return inputs, message, errors


def kind_filters(kind: str, event: str) -> dict:
    """A ci_failure trigger takes a check suite or a workflow run that failed."""
    if kind == "ci_failure" and event in KIND_EVENTS["ci_failure"]:
        return {f"/{event}/conclusion": ["failure"]}
    return {}


def recipe_spec(recipe):
    """The recipe's current version as it loads (as start_run reads it), or None."""
    from runs.executor.spec import SpecError, spec_of

    version = recipe.current_version
    if version is None:
        return None
    try:
        return spec_of(recipe, version)
    except SpecError:
        return None  # start_run refuses it, saying why


def declared_trigger(recipe, spec) -> dict:
    if spec is None:
        return {}
    try:
        return kinds.get(recipe.kind).declared_trigger(spec)
    except kinds.UnknownKind:
        return {}


# --- starting, recording -------------------------------------------------------------------------


def start(webhook: Webhook, sent: Sent, inputs: dict, message: str) -> Answer:
    """The run, recorded in the transaction that creates it: of two copies of a delivery
    racing here, the second's record waits on the first's and fails, and it starts nothing."""
    try:
        with transaction.atomic():
            row = WebhookDelivery.objects.create(
                webhook=webhook,
                delivery_id=sent.delivery_id,
                event=sent.event[:EVENT_LIMIT],
                status=201,
                outcome=WebhookDelivery.Outcome.STARTED,
            )
            run = services.start_run(
                webhook.recipe,
                actor(webhook),
                message=message,
                inputs=inputs,
                repository=webhook.repository,
            )
            row.run, row.note = run, f"started run {run.pk}"
            row.save(update_fields=["run", "note"])
    except IntegrityError:
        duplicate = _duplicate(webhook, sent)
        if duplicate is None:
            raise
        return duplicate
    except services.InputError as exc:
        return Answer(422, "The recipe refuses the delivery's inputs.", errors=exc.errors)
    except services.ServiceError as exc:
        return Answer(exc.status, str(exc))
    return Answer(201, f"Started run {run.pk}.", run=run.pk)


def _record(webhook: Webhook, sent: Sent, answer: Answer) -> WebhookDelivery:
    note = answer.detail
    if answer.errors:
        note += " " + "; ".join(f"{name}: {why}" for name, why in answer.errors.items())
    log.info("webhook %s: %s %s", webhook.pk, answer.status, note[:200])
    return WebhookDelivery.objects.create(
        webhook=webhook,
        delivery_id=sent.delivery_id[:DELIVERY_ID_LIMIT],
        event=sent.event[:EVENT_LIMIT],
        status=answer.status,
        outcome=answer.outcome,
        note=note[:NOTE_LIMIT],
        run_id=answer.run,
    )
