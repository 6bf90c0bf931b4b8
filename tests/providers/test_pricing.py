"""Cost where the provider reports none: the provider's price options, else the price table
of well-known models, else "unknown" — per iteration and per run on the run page."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

from runs.providers.pricing import cost, table_price
from tests.conftest import wait_run
from tests.providers.conftest import iterations

LONG_MESSAGE = " ".join(["word"] * 4000)  # the fake counts words as tokens


def recipe(url: str, model: str, options: str = "") -> str:
    return f"""
name: priced
provider: agent
model: {model}
providers:
  agent: {{kind: openai, base_url: "{url}", api_key_env: FAKE_PROVIDER_KEY{options}}}
nodes:
  - id: work
    loop:
      prompt: "Say something about: $USER_MESSAGE"
      until: DONE
      max_iterations: 1
"""


def run_page(client, viewer, run) -> tuple[str, str]:
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    header = page.split('id="run-header"')[1].split("</section>")[0]
    return page, header


def shown(amount: Decimal) -> str:
    """What the page's `floatformat:4` writes."""
    return "$" + str(amount.quantize(Decimal("0.0001"), rounding=ROUND_HALF_UP))


def test_the_table_knows_snapshots_of_a_model_but_guesses_no_other_model():
    assert table_price("gpt-4o-mini") == (Decimal("0.15"), Decimal("0.60"))
    assert table_price("gpt-4o-mini-2024-07-18") == table_price("gpt-4o-mini")
    assert table_price("claude-sonnet-4-20250514") == (Decimal("3.00"), Decimal("15.00"))
    assert table_price("claude-3-5-haiku-latest") == (Decimal("0.80"), Decimal("4.00"))
    # A newer model with a longer name is not priced as the older one it starts with.
    assert table_price("claude-opus-4-5") != table_price("claude-opus-4")
    assert table_price("gpt-4o-mini-tts") is None
    assert table_price("llama3.1") is None and table_price(None) is None


def test_price_options_win_over_the_table():
    assert cost({}, 1_000_000, 1_000_000, "gpt-4o") == Decimal("12.500000")
    assert cost({"price_in": 0, "price_out": 0}, 1_000_000, 1_000_000, "gpt-4o") == 0
    assert cost({"price_in": 1, "price_out": 2}, 1_000_000, 0, "gpt-4o") == Decimal("1.000000")
    assert cost({}, 1_000_000, 1_000_000, "local-model") is None
    assert cost({}, None, None, "gpt-4o") is None  # no usage reported: nothing to price


def test_a_known_model_without_prices_is_priced_from_the_table(
    live_worker, start, fake_ai, client, viewer
):
    fake_ai.answers = ["All done.\n<promise>DONE</promise>"]
    run = wait_run(start(recipe(fake_ai.url + "/v1", "gpt-4o-mini"), message=LONG_MESSAGE))
    assert run.status == "completed", run.error
    (only,) = iterations(run)
    assert only.tokens_in > 4000 and only.tokens_out
    expected = (Decimal("0.15") * only.tokens_in + Decimal("0.60") * only.tokens_out) / 10**6
    assert only.cost_usd == expected.quantize(Decimal("0.000001"))
    page, header = run_page(client, viewer, run)
    assert f"{only.tokens_in}→{only.tokens_out} tokens · {shown(expected)}" in page
    assert f'<dd class="run-cost">{shown(expected)}' in header
    assert "unknown" not in header


def test_a_model_the_table_does_not_know_costs_unknown(live_worker, start, fake_ai, client, viewer):
    fake_ai.answers = ["All done.\n<promise>DONE</promise>"]
    run = wait_run(start(recipe(fake_ai.url + "/v1", "fake-model"), message=LONG_MESSAGE))
    assert run.status == "completed", run.error
    (only,) = iterations(run)
    assert only.tokens_in and only.cost_usd is None
    page, header = run_page(client, viewer, run)
    assert f"{only.tokens_in}→{only.tokens_out} tokens · cost unknown" in page
    assert '<dd class="run-cost"><span class="muted">unknown</span>' in header
