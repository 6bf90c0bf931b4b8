"""Soft budgets: reaching a soft limit opens a gate with a forecast from the latest
iterations; continuing raises the limit and the run goes on, stopping turns it into a hard
budget stop (raise and resume still work). Through a real worker and a priced provider."""

from __future__ import annotations

from decimal import Decimal

import pytest

from recipes.validation import validate_source
from runs import budget, services
from runs.actor import Actor
from runs.errors import ServiceError
from tests.conftest import pending_gate, wait_run

# $1 a word answered: the cost of an iteration is its answer's word count.
SOURCE = """
name: soft
provider: agent
model: worker-model
providers:
  agent: {{kind: openai, base_url: "{url}/v1", api_key_env: FAKE_PROVIDER_KEY, price_in: 0, price_out: 1000000}}
budget: {{cost_usd: 10, soft: true}}
nodes:
  - id: work
    loop:
      prompt: "Go on."
      fresh_context: true
      until: DONE
      max_iterations: 8
"""


@pytest.fixture
def actor(operator):
    return Actor.operator(operator, "api")


def costs(run):
    return [it.cost_usd for it in run.iterations.filter(node_id="work").order_by("number")]


def soft_gate(start, fake_ai, answers):
    fake_ai.answers = list(answers)
    run = wait_run(start(SOURCE.format(url=fake_ai.url)), "paused", "completed", "failed")
    gate = pending_gate(run)
    assert gate is not None and gate.kind == "budget", run.error
    return run, gate


def test_the_gate_forecasts_the_next_iteration_within_a_fifth_and_continuing_goes_on(
    live_worker, start, fake_ai, actor
):
    run, gate = soft_gate(start, fake_ai, ["a b c d", "a b c d", "a b c d e", "a b c d e", "DONE"])
    assert costs(run) == [Decimal(4), Decimal(4), Decimal(5)]  # $13: past $10 before the 4th
    assert run.status == "paused"
    assert gate.message.startswith("Soft budget reached — cost (USD): $13 of $10.")
    # The mean of the last three: $4.3333 for an iteration that costs $5 (13 % off).
    assert "about $4.3333" in gate.message
    event = run.events.get(kind="budget_soft_reached")
    forecast = Decimal(event.data["forecast"]["cost_usd"])
    assert [d["id"] for d in gate.decisions] == ["continue", "stop"]
    assert gate.decisions[0]["label"] == "Continue for about $13 more"
    services.approve(gate.pk, actor, decision="continue")
    run = wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert (
        run.budget["cost_usd"] == "26"
    )  # $13 spent, $13 more and run.budget["soft"] == ["cost_usd"]
    actual = costs(run)[3]
    assert abs(forecast - actual) / actual <= Decimal("0.2")


def test_an_amount_must_read_as_one_and_a_given_amount_is_added(live_worker, start, fake_ai, actor):
    run, gate = soft_gate(start, fake_ai, ["a b c d"] * 3 + ["a"] * 4 + ["DONE"])
    with pytest.raises(ServiceError, match="amount to add must be an amount in US dollars"):
        services.approve(gate.pk, actor, decision="continue", comment="lots")
    gate.refresh_from_db()
    assert gate.status == "pending"
    services.approve(gate.pk, actor, decision="continue", comment="$2")
    run = wait_run(run, "paused", "completed", "failed")
    assert run.budget["cost_usd"] == "14"  # 12 spent, 2 more: two one-word iterations
    again = pending_gate(run)
    assert again.kind == "budget" and again.pk != gate.pk
    assert costs(run) == [Decimal(4)] * 3 + [Decimal(1)] * 2


def test_stopping_is_a_budget_stop_that_raising_resumes(live_worker, start, fake_ai, actor):
    run, gate = soft_gate(start, fake_ai, ["a b c d"] * 3 + ["DONE"])
    services.approve(gate.pk, actor, decision="stop")
    run.refresh_from_db()
    assert run.status == "budget_exceeded"
    assert run.error.startswith("Stopped at its soft budget by")
    assert [s.exceeded for s in budget.limits(run)] == [True]
    services.set_budget(run, actor, {"cost_usd": "20"}, resume=True)
    run = wait_run(run, "completed", "failed")
    assert run.status == "completed" and len(costs(run)) == 4


def test_soft_is_true_or_a_list_of_limits_with_a_limit_each(db):
    def problems(budget_text):
        source = SOURCE.format(url="http://127.0.0.1:1")
        source = source.replace("budget: {cost_usd: 10, soft: true}", budget_text)
        return {p.path: p.message for p in validate_source(source, "s.yaml").errors}

    assert problems("budget: {cost_usd: 1, tokens: 9, soft: [tokens]}") == {}
    assert "no limit" in problems("budget: {cost_usd: 1, soft: [tokens]}")["budget.soft"]
    assert "unknown limit" in problems("budget: {cost_usd: 1, soft: [money]}")["budget.soft"]
    assert "must be true" in problems("budget: {cost_usd: 1, soft: yes please}")["budget.soft"]


def test_a_soft_limit_stays_soft_when_the_start_form_sends_the_limits(
    db, make_recipe, operator, client
):
    recipe = make_recipe(SOURCE.format(url="http://127.0.0.1:1"), slug="soft-form")
    client.force_login(operator)
    form = client.get(f"/recipes/{recipe.slug}/start/").content.decode()
    assert "Soft: reaching it asks whether to go on" in form
    kept = services.start_run(
        recipe,
        Actor.operator(operator, "console"),
        message="go",
        budget={"cost_usd": "12", "tokens": ""},
        budget_replaces_recipe=True,
        start=False,
    )
    assert kept.budget == {"cost_usd": "12", "soft": ["cost_usd"]}
    dropped = services.start_run(
        recipe,
        Actor.operator(operator, "console"),
        message="go",
        budget={"cost_usd": ""},
        budget_replaces_recipe=True,
        start=False,
    )
    assert dropped.budget == {}
