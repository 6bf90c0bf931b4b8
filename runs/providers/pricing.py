"""Cost of a call from token counts, for providers whose API reports tokens but no price.

Prices come from the provider's options, in USD per million tokens:
`price_in: 3.0`, `price_out: 15.0`. Without them the cost stays unknown (None).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation


def cost(options: dict, tokens_in: int | None, tokens_out: int | None) -> Decimal | None:
    try:
        price_in = Decimal(str(options["price_in"])) if "price_in" in options else None
        price_out = Decimal(str(options["price_out"])) if "price_out" in options else None
    except InvalidOperation:
        return None
    if price_in is None and price_out is None:
        return None
    total = Decimal(0)
    if price_in is not None and tokens_in:
        total += price_in * tokens_in / 1_000_000
    if price_out is not None and tokens_out:
        total += price_out * tokens_out / 1_000_000
    return total.quantize(Decimal("0.000001"))
