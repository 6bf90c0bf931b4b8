"""Decisions at gates in the audit log: a run of an `approval` recipe pauses at its gate in
a real worker and is decided through `runs.services.respond` (and the console's form);
the answer is a `decision` event of the run's project. The decisions' export (issue 36)
takes a project too."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command

from console.models import AuditEvent, Project
from runs import services
from runs.actor import ENGINE, Actor
from tests.api.conftest import client_for
from tests.conftest import pending_gate, wait_for, wait_run

pytestmark = pytest.mark.usefixtures("live_worker")

GATED = """
name: {name}
nodes:
  - id: decide
    approval:
      message: Ship it?
      decisions:
        - {{id: ship, label: Ship}}
        - {{id: hold, label: Hold}}
"""


def paused(make_recipe, slug: str, project: Project | None = None):
    recipe = make_recipe(GATED.format(name=slug), slug=slug)
    if project is not None:
        recipe.project = project
        recipe.save()
    run = services.start_run(recipe, ENGINE, message="audit")
    return run, wait_for(lambda: pending_gate(run), message=f"{slug}'s gate")


def test_a_decision_is_recorded_in_the_run_s_project(make_recipe, operator, client):
    beta = Project.objects.create(name="Beta", slug="beta")
    run, gate = paused(make_recipe, "beta-gate", beta)
    services.respond(
        gate.pk, Actor.operator(operator, "api"), "hold", text="=1+1", digest=gate.digest
    )
    wait_run(run, "completed", "failed")
    (decided,) = AuditEvent.objects.filter(kind=AuditEvent.Kind.DECISION)
    assert decided.subject == f"run {run.pk} gate {gate.pk}: hold"
    assert (decided.project, decided.actor, decided.actor_name, decided.via) == (
        beta,
        operator,
        "otto",
        "api",
    )
    assert decided.data["decision"] == "hold" and decided.data["digest"] == gate.digest
    assert decided.data["text"] == "=1+1" and decided.data["closed_gate"] is True

    other, other_gate = paused(make_recipe, "default-gate")
    client.force_login(operator)
    url = f"/runs/{other.pk}/gates/{other_gate.pk}/respond/"
    client.post(url, {"decision": "ship", "text": "", "digest": other_gate.digest})
    from_console = AuditEvent.objects.filter(kind=AuditEvent.Kind.DECISION).latest("id")
    assert from_console.subject == f"run {other.pk} gate {other_gate.pk}: ship"
    assert (from_console.via, from_console.address) == ("console", "127.0.0.1")
    assert from_console.project == Project.default()


def test_the_decisions_export_takes_a_project(make_recipe, operator, viewer):
    beta = Project.objects.create(name="Beta", slug="beta")
    for slug, project in (("beta-gate", beta), ("default-gate", None)):
        run, gate = paused(make_recipe, slug, project)
        services.respond(gate.pk, Actor.operator(operator, "api"), "ship", digest=gate.digest)
        wait_run(run, "completed", "failed")

    api = client_for(viewer)
    answer = api.client.get("/api/audit/decisions", {"project": "beta"}, headers=api.headers)
    assert answer.status_code == 200
    (line,) = b"".join(answer.streaming_content).decode().splitlines()
    assert json.loads(line)["recipe"] == "beta-gate"
    both = api.client.get("/api/audit/decisions", headers=api.headers)
    assert len(b"".join(both.streaming_content).decode().splitlines()) == 2
    nowhere = api.client.get("/api/audit/decisions", {"project": "gamma"}, headers=api.headers)
    assert b"".join(nowhere.streaming_content) == b""

    out = io.StringIO()
    call_command("audit", "decisions", "--project", "default", "--format", "csv", stdout=out)
    assert [r["recipe"] for r in csv.DictReader(io.StringIO(out.getvalue()))] == ["default-gate"]
