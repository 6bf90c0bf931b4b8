"""A quorum: `approvals: 2` needs two distinct people; each approval shows on the page and
in the API while it is short; the same person twice is refused; feedback or a reject by
anyone decides at once; `approvers: others` keeps the starter from approving."""

from __future__ import annotations

import pytest

from runs import services
from runs.actor import Actor
from runs.errors import Conflict, StarterCannotApprove
from tests.api.conftest import client_for
from tests.conftest import make_user, pending_gate, wait_for
from tests.decisions.test_declared_decisions import branches

pytestmark = pytest.mark.usefixtures("live_worker")

TWO_PEOPLE = """
name: two people
approvers: others
nodes:
  - id: decide
    approval:
      message: Ship the release?
      approvals: 2
      decisions:
        - {id: ship, label: Ship it}
  - id: shipped
    depends_on: [decide]
    when: "$decide.output.decision == 'ship'"
    bash: echo shipping
"""


@pytest.fixture
def second_operator(django_user_model):
    return make_user(django_user_model, "olga", "operator")


def started(make_recipe, who):
    recipe = make_recipe(TWO_PEOPLE, slug="two-people")
    run = services.start_run(recipe, Actor.operator(who, "console"), message="v3")
    return run, wait_for(lambda: pending_gate(run), message="the gate")


def test_two_distinct_people_make_a_quorum(
    make_recipe, admin_user, operator, second_operator, client
):
    run, gate = started(make_recipe, admin_user)
    with pytest.raises(StarterCannotApprove):  # four eyes: not the one who started it
        services.respond(gate.pk, Actor.operator(admin_user, "console"), "ship")
    services.respond(gate.pk, Actor.operator(operator, "console"), "ship")
    gate.refresh_from_db()
    assert gate.is_pending and gate.approvals_given() == 1
    with pytest.raises(Conflict, match="already approved this gate; it needs 2"):
        services.respond(gate.pk, Actor.operator(operator, "api"), "ship")
    shown = client_for(operator).get(f"/api/runs/{run.pk}").body["pending_gate"]
    assert shown["approvals_needed"] == 2
    assert [a["by"] for a in shown["approvals"]] == [operator.username]
    client.force_login(second_operator)
    page = client.get(f"/runs/{run.pk}/gates/{gate.pk}/").content.decode()
    assert "Approvals: <strong>1 of 2</strong> — otto (ship)" in page
    client.post(f"/runs/{run.pk}/gates/{gate.pk}/respond/", {"decision": "ship"})
    assert branches(run)["shipped"] == "completed"
    assert list(gate.responses.values_list("by_name", "closed_gate")) == [
        ("otto", False),
        ("olga", True),
    ]
    assert run.events.filter(kind="gate_approval_counted").get().data["approvals"] == 1


def test_a_reject_by_anyone_ends_a_short_quorum(make_recipe, admin_user, operator, second_operator):
    run, gate = started(make_recipe, admin_user)
    services.respond(gate.pk, Actor.operator(operator, "console"), "ship")
    services.respond(gate.pk, Actor.operator(second_operator, "console"), "reject", text="not yet")
    assert branches(run)["decide"] == "failed"
    gate.refresh_from_db()
    assert gate.status == "rejected" and gate.result["decision"] == "reject"
