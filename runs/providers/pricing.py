"""Cost of a call from token counts, for providers whose API reports tokens but no price.

Prices are USD per million tokens. In order:
1. the provider's options, `price_in: 3.0`, `price_out: 15.0` (an admin's figure always
   wins, `price_in: 0` included — e.g. for a local server that reuses a well-known name);
2. the table of well-known models below, looked up by the model the call named;
3. otherwise the cost stays unknown (None), and pages say "unknown".

A provider that reports its own cost (Claude Code's `total_cost_usd`) never gets here.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# List prices (input, output) in USD per million tokens, as published by OpenAI and
# Anthropic in 2025. A default only: prices change, and batch, cached-input or
# long-context rates are not modelled; set price_in / price_out on the provider to override.
MODEL_PRICES: dict[str, tuple[str, str]] = {
    # OpenAI
    "gpt-5": ("1.25", "10.00"),
    "gpt-5-mini": ("0.25", "2.00"),
    "gpt-5-nano": ("0.05", "0.40"),
    "gpt-5-codex": ("1.25", "10.00"),
    "gpt-4.1": ("2.00", "8.00"),
    "gpt-4.1-mini": ("0.40", "1.60"),
    "gpt-4.1-nano": ("0.10", "0.40"),
    "gpt-4o": ("2.50", "10.00"),
    "gpt-4o-mini": ("0.15", "0.60"),
    "o3": ("2.00", "8.00"),
    "o3-mini": ("1.10", "4.40"),
    "o4-mini": ("1.10", "4.40"),
    "o1": ("15.00", "60.00"),
    # Anthropic
    "claude-opus-4-5": ("5.00", "25.00"),
    "claude-opus-4-1": ("15.00", "75.00"),
    "claude-opus-4": ("15.00", "75.00"),
    "claude-sonnet-4-5": ("3.00", "15.00"),
    "claude-sonnet-4": ("3.00", "15.00"),
    "claude-haiku-4-5": ("1.00", "5.00"),
    "claude-3-7-sonnet": ("3.00", "15.00"),
    "claude-3-5-sonnet": ("3.00", "15.00"),
    "claude-3-5-haiku": ("0.80", "4.00"),
    "claude-3-haiku": ("0.25", "1.25"),
}

# A dated snapshot or alias of a listed model costs what the model does:
# gpt-4o-mini-2024-07-18, claude-sonnet-4-20250514, claude-3-5-haiku-latest.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


def table_price(model: str | None) -> tuple[Decimal, Decimal] | None:
    """The table's (input, output) price of a model, or None when it is not listed. Only
    exact names (after dropping a snapshot suffix): `claude-opus-4-5` must not be priced
    as `claude-opus-4`, and a local model is never guessed at."""
    if not model:
        return None
    name = _SNAPSHOT.sub("", model.strip().lower())
    found = MODEL_PRICES.get(name)
    return (Decimal(found[0]), Decimal(found[1])) if found else None


def cost(
    options: dict, tokens_in: int | None, tokens_out: int | None, model: str | None = None
) -> Decimal | None:
    try:
        price_in = Decimal(str(options["price_in"])) if "price_in" in options else None
        price_out = Decimal(str(options["price_out"])) if "price_out" in options else None
    except InvalidOperation:
        return None
    if price_in is None and price_out is None:
        known = table_price(model)
        if known is None or (tokens_in is None and tokens_out is None):
            return None
        price_in, price_out = known
    total = Decimal(0)
    if price_in is not None and tokens_in:
        total += price_in * tokens_in / 1_000_000
    if price_out is not None and tokens_out:
        total += price_out * tokens_out / 1_000_000
    return total.quantize(Decimal("0.000001"))
