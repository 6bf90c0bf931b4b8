"""`approvers: others`: the person who started a run cannot approve its gates (console,
API, CLI), another operator can; feedback and rejecting stay open to the starter."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from recipes.loader import load_recipe
from runs import services
from runs.actor import Actor
from runs.models import Gate, NodeRun, Run
from tests.api.conftest import client_for
from tests.conftest import make_user

pytestmark = pytest.mark.django_db

RECIPE = """name: four-eyes
description: a release someone else signs off
provider: demo
approvers: others
nodes:
  - id: decide
    approval:
      message: Ship it?
      decisions: [ship, hold]
"""


@pytest.fixture
def second_operator(django_user_model):
    return make_user(django_user_model, "olga", "operator")


@pytest.fixture
def paused(make_recipe, operator):
    run = services.start_run(
        make_recipe(RECIPE, "four-eyes"), actor=Actor.operator(operator, "console"), message="v2"
    )
    Run.objects.filter(pk=run.pk).update(status="paused")
    row = NodeRun.objects.create(run=run, node_id="decide", kind="approval", status="paused")
    gate = Gate.objects.create(
        run=run,
        node_run=row,
        node_id="decide",
        kind=Gate.Kind.APPROVAL,
        message="Ship it?",
        decisions=[{"id": "ship", "label": "ship"}, {"id": "hold", "label": "hold"}],
    )
    return run, gate


def test_the_policy_is_part_of_the_recipe_language():
    assert load_recipe(RECIPE).spec.approvers == "others"
    assert load_recipe(RECIPE.replace("approvers: others\n", "")).spec.approvers == "anyone"
    bad = load_recipe(RECIPE.replace("approvers: others", "approvers: me"))
    assert not bad.ok and any(p.path == "approvers" for p in bad.errors)


def test_the_starter_cannot_approve_through_the_services(paused, operator, second_operator):
    run, gate = paused
    with pytest.raises(services.StarterCannotApprove, match="someone other than the person"):
        services.approve(gate.pk, Actor.operator(operator, "console"), decision="ship")
    gate.refresh_from_db()
    assert gate.status == "pending"
    services.approve(gate.pk, Actor.operator(second_operator, "console"), decision="ship")
    gate.refresh_from_db()
    assert gate.status == "accepted" and gate.decided_by == second_operator


def test_the_starter_may_still_reject(paused, operator):
    run, gate = paused
    services.reject(gate.pk, Actor.operator(operator, "console"), reason="not ready")
    gate.refresh_from_db()
    assert gate.status == "rejected"


def test_the_api_answers_403_with_the_reason(paused, operator, second_operator):
    run, gate = paused
    refused = client_for(operator).post(f"/api/runs/{run.pk}/approve", {"decision": "ship"})
    assert refused.status_code == 403
    assert "approvers: others" in refused.body["detail"]
    done = client_for(second_operator).post(f"/api/runs/{run.pk}/approve", {"decision": "ship"})
    assert done.status_code == 200


def test_the_console_says_why_on_the_run_page(paused, operator):
    run, gate = paused
    client = Client()
    client.force_login(operator)
    page = client.post(
        f"/runs/{run.pk}/gates/{gate.pk}/approve/", {"decision": "ship"}, follow=True
    )
    assert page.status_code == 200
    assert "someone other than the person who started the run" in page.content.decode()
    gate.refresh_from_db()
    assert gate.status == "pending"


def test_the_cli_refuses_the_starter_and_an_anonymous_command_line(paused, operator):
    run, gate = paused
    with pytest.raises(CommandError, match="approvers: others"):
        call_command("run", "approve", str(run.pk), "--decision", "ship", "--user", "otto")
    with pytest.raises(CommandError, match="--user NAME"):
        call_command("run", "approve", str(run.pk), "--decision", "ship")
    gate.refresh_from_db()
    assert gate.status == "pending"
