"""The audit of decisions: every answer (who, which decision, the digest, from where) in
the run's event log and in the export, JSON Lines or CSV, filtered by date and recipe,
from the API and from `manage.py audit decisions`."""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from runs import services
from runs.actor import ENGINE, Actor
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for
from tests.decisions.test_declared_decisions import THREE_WAYS, branches

pytestmark = pytest.mark.usefixtures("live_worker")


def decided(make_recipe, operator, slug, decision, text=""):
    run = services.start_run(make_recipe(THREE_WAYS, slug=slug), ENGINE, message="v2")
    gate = wait_for(lambda: pending_gate(run), message="the gate")
    services.respond(
        gate.pk, Actor.operator(operator, "api"), decision, text=text, digest=gate.digest
    )
    branches(run)
    return run, gate


def test_the_export_says_who_what_on_which_digest_and_from_where(make_recipe, operator, viewer):
    before = timezone.now()
    run, gate = decided(make_recipe, operator, "three-ways", "hold", text="=HYPERLINK(1)")
    decided(make_recipe, operator, "other-recipe", "ship")
    event = run.events.get(kind="gate_decided").data
    assert (event["answered"], event["by"], event["surface"], event["digest"]) == (
        "hold",
        operator.username,
        "api",
        gate.digest,
    )

    api = client_for(viewer)
    answer = api.client.get(
        "/api/audit/decisions",
        {"recipe": "three-ways", "since": before.isoformat()},
        headers=api.headers,
    )
    assert answer.status_code == 200
    (line,) = b"".join(answer.streaming_content).decode().splitlines()
    record = json.loads(line)
    assert record["run"] == run.pk and record["node"] == "decide"
    assert (record["decision"], record["by"], record["via"]) == ("hold", "otto", "api")
    assert record["digest"] == gate.digest and record["closed_gate"] is True

    later = (timezone.now() + timedelta(minutes=1)).isoformat()
    empty = api.client.get("/api/audit/decisions", {"since": later}, headers=api.headers)
    assert b"".join(empty.streaming_content) == b""

    out = io.StringIO()
    call_command("audit", "decisions", "--format", "csv", stdout=out)
    rows = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert [r["recipe"] for r in rows] == ["three-ways", "other-recipe"]
    assert rows[0]["text"] == "'=HYPERLINK(1)"  # a spreadsheet reads it as text


def test_the_export_needs_a_reader(make_recipe, outsider):
    refused = client_for(outsider).get("/api/audit/decisions")
    assert refused.status_code == 403
