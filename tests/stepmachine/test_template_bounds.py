"""`*` and `**` in step-machine templates are sized before they run: a repetition or a power
too big for a rendered text is refused with a message, without building the result."""

from __future__ import annotations

import tracemalloc

import pytest

from loops.stepmachine.rendering import (
    MAX_INTEGER_BITS,
    MAX_RENDERED,
    RenderError,
    render,
    render_command,
)


def refused(source: str, context: dict | None = None) -> tuple[str, int]:
    """The refusal's message, and the most memory rendering took meanwhile (bytes)."""
    tracemalloc.start()
    try:
        with pytest.raises(RenderError) as caught:
            render(source, context or {})
        return str(caught.value), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_a_huge_text_repetition_is_refused_before_it_is_built():
    message, peak = refused("{{ 'a' * 100000000 }}")
    assert message == (
        "refused by the template sandbox: repeating a text 100,000,000 times would make "
        f"100,000,000 characters, more than the {MAX_RENDERED:,} a rendered text may have"
    )
    assert peak < 5_000_000  # the 100 MB text was never made


def test_the_count_may_come_first_or_from_a_value_and_lists_count_items():
    message, peak = refused("{{ inputs.n * inputs.word }}", {"inputs": {"n": 10**9, "word": "ab"}})
    assert "repeating a text 1,000,000,000 times would make 2,000,000,000 characters" in message
    message, peak = refused("{{ ([0] * 2000000) | length }}")
    assert "repeating a list 2,000,000 times would make 2,000,000 items" in message
    assert peak < 5_000_000


def test_powers_and_products_of_whole_numbers_are_sized_by_their_bits():
    message, peak = refused("{{ 9 ** (9 ** 9) }}")
    assert message.startswith("refused by the template sandbox: 9 ** 387,420,489 would have")
    assert f"more than the {MAX_INTEGER_BITS:,} templates may compute" in message
    assert peak < 5_000_000
    assert render("{{ (2 ** 60000) > 2 ** 59999 }}", {}) == "True"
    message, _ = refused("{{ (2 ** 60000) * (2 ** 60000) }}")
    assert "a product of about 120,002 bits" in message


def test_ordinary_arithmetic_and_repetition_still_render():
    assert render("{{ '-' * 20 }}", {}) == "-" * 20
    assert render("{{ 3 * 4 }} {{ 2 ** 10 }} {{ 2.5 ** 2 }} {{ [1, 2] * 2 }}", {}) == (
        "12 1024 6.25 [1, 2, 1, 2]"
    )
    assert render("{{ 'ab' * 0 }}|{{ 'ab' * -3 }}|{{ (-1) ** 1000001 }}", {}) == "||-1"


def test_gate_commands_are_bounded_the_same_way():
    with pytest.raises(RenderError, match="repeating a text 100,000,000 times"):
        render_command("echo {{ 'a' * 100000000 }}", {})
