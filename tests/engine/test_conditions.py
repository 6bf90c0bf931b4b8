import pytest

from runs.engine.conditions import (
    Compare,
    Condition,
    ConditionError,
    Literal,
    Ref,
    evaluate,
    parse_condition,
    references,
)


def resolver(values=None, prev=None):
    values = values or {}
    prev = prev or {}
    calls = []

    def resolve(node, field, loop_prev):
        calls.append((node, field, loop_prev))
        table = prev if loop_prev else values
        return table.get((node, field), "")

    resolve.calls = calls
    return resolve


def ev(expr, values=None, prev=None):
    return evaluate(parse_condition(expr), resolver(values, prev))


# --- parsing -----------------------------------------------------------------------


def test_parse_returns_condition_with_ast():
    cond = parse_condition("$review.output.score == '80'")
    assert isinstance(cond, Condition)
    assert cond.source == "$review.output.score == '80'"
    assert cond.root == Compare("==", Ref("review", "score", False), Literal("80"))


def test_parse_loop_prev_reference():
    cond = parse_condition("$LOOP_PREV.test.output == 'red'")
    assert cond.root == Compare("==", Ref("test", None, True), Literal("red"))


def test_condition_is_hashable_and_frozen():
    cond = parse_condition("$a.output")
    assert hash(cond) == hash(parse_condition("$a.output"))
    with pytest.raises(AttributeError):
        cond.source = "x"  # type: ignore[misc]


# --- equality ----------------------------------------------------------------------


def test_equality_single_quotes():
    assert ev("$test.output == 'red'", {("test", None): "red"})


def test_equality_double_quotes():
    assert ev('$test.output == "red"', {("test", None): "red"})


def test_inequality():
    assert ev("$test.output != 'red'", {("test", None): "green"})
    assert not ev("$test.output != 'red'", {("test", None): "red"})


def test_resolved_value_whitespace_stripped():
    assert ev("$test.output == 'red'", {("test", None): "red\n"})


def test_literal_whitespace_preserved():
    assert not ev("$test.output == ' red'", {("test", None): "red"})


def test_equality_is_case_sensitive():
    assert not ev("$test.output == 'RED'", {("test", None): "red"})


def test_bare_number_compares_as_string():
    assert ev("$x.output.score == 80", {("x", "score"): "80"})
    assert not ev("$x.output.score == 80", {("x", "score"): "80.0"})


def test_bare_true_false_compare_as_strings():
    assert ev("$d.output.done == true", {("d", "done"): "true"})
    assert ev("$d.output.done != false", {("d", "done"): "true"})


def test_literal_on_left_side():
    assert ev("'red' == $test.output", {("test", None): "red"})


def test_escaped_quote_in_literal():
    assert ev(r"$a.output == 'it\'s'", {("a", None): "it's"})


def test_hyphenated_node_id():
    assert ev("$fix-loop.output == 'ok'", {("fix-loop", None): "ok"})


def test_two_references_compared():
    assert ev("$a.output == $b.output", {("a", None): "x", ("b", None): "x"})


def test_missing_value_is_empty_string():
    assert ev("$gone.output == ''")
    assert not ev("$gone.output == 'red'")


def test_loop_prev_on_first_iteration_is_false_for_nonempty_equality():
    assert not ev("$LOOP_PREV.test.output == 'red'")


def test_loop_prev_uses_previous_values():
    assert ev("$LOOP_PREV.test.output == 'red'", {("test", None): "green"}, {("test", None): "red"})


# --- numeric -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ("$r.output.score > 70", True),
        ("$r.output.score >= 80", True),
        ("$r.output.score < 80", False),
        ("$r.output.score <= 80", True),
        ("$r.output.score > 79.5", True),
        ("$r.output.score < '100'", True),
        ("$r.output.score > -1", True),
    ],
)
def test_numeric_comparisons(expr, expected):
    assert ev(expr, {("r", "score"): "80"}) is expected


def test_numeric_is_not_lexicographic():
    assert ev("$r.output.n < 10", {("r", "n"): "9"})


def test_numeric_comparison_with_non_number_is_false():
    assert not ev("$r.output.score > 5", {("r", "score"): "high"})
    assert not ev("$r.output.score <= 5", {("r", "score"): ""})


def test_numeric_non_number_negated_is_true():
    assert ev("not $r.output.score > 5", {("r", "score"): "high"})


# --- truthiness --------------------------------------------------------------------------


def test_bare_reference_truthy_when_non_empty():
    assert ev("$a.output", {("a", None): "x"})


def test_bare_reference_falsy_when_empty_or_whitespace():
    assert not ev("$a.output")
    assert not ev("$a.output", {("a", None): "  \n"})


def test_bare_literal_alone_rejected():
    with pytest.raises(ConditionError, match="column 1"):
        parse_condition("'yes'")


# --- boolean logic ------------------------------------------------------------------------


def test_and_or_words():
    vals = {("a", None): "1", ("b", None): "2"}
    assert ev("$a.output == '1' and $b.output == '2'", vals)
    assert not ev("$a.output == '1' and $b.output == '3'", vals)
    assert ev("$a.output == '9' or $b.output == '2'", vals)


def test_and_or_symbols():
    vals = {("a", None): "1"}
    assert ev("$a.output == '1' && $a.output != '2'", vals)
    assert ev("$a.output == '2' || $a.output == '1'", vals)


def test_and_binds_tighter_than_or():
    # true or (false and false) -> true ; (true or false) and false would be false
    assert ev("$a.output or $b.output and $c.output", {("a", None): "x"})


def test_parentheses_override_precedence():
    assert not ev("($a.output or $b.output) and $c.output", {("a", None): "x"})


def test_not_operator_and_bang():
    assert ev("not $a.output")
    assert ev("!($a.output == 'x')")
    assert not ev("not not $a.output")


def test_not_binds_tighter_than_and():
    assert ev("not $a.output and $b.output", {("b", None): "y"})


def test_short_circuit_skips_right_side():
    resolve = resolver({("a", None): "x"})
    assert evaluate(parse_condition("$a.output or $b.output"), resolve)
    assert resolve.calls == [("a", None, False)]


def test_field_is_passed_to_resolver():
    resolve = resolver()
    evaluate(parse_condition("$LOOP_PREV.r.output.done == true"), resolve)
    assert resolve.calls == [("r", "done", True)]


# --- references ----------------------------------------------------------------------------


def test_references_collects_all_nodes():
    cond = parse_condition(
        "($a.output == 'x' or not $b.output.f) and $LOOP_PREV.c.output != $a.output.g"
    )
    assert references(cond) == {("a", False), ("b", False), ("c", True)}


def test_references_distinguishes_loop_prev():
    cond = parse_condition("$t.output == $LOOP_PREV.t.output")
    assert references(cond) == {("t", False), ("t", True)}


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "column"),
    [
        ("$a.output ==", 13),
        ("$a.output == 'x' and", 21),
        ("== 'x'", 1),
        ("$a.output = 'x'", 11),
        ("$a.output == red", 14),
        ("($a.output", 11),
        ("$a.output)", 10),
        ("$HOME == 'x'", 1),
        ("$a.output == 'unterminated", 14),
        ("$a.output 'x'", 11),
        ("$a.out == 'x'", 1),
        ("$a.output. == 'x'", 1),
    ],
)
def test_garbage_raises_with_column(expr, column):
    with pytest.raises(ConditionError) as exc:
        parse_condition(expr)
    assert exc.value.column == column
    assert f"column {column}" in str(exc.value)


def test_empty_condition_rejected():
    with pytest.raises(ConditionError, match="empty"):
        parse_condition("   ")


def test_non_string_rejected():
    with pytest.raises(ConditionError):
        parse_condition(True)  # type: ignore[arg-type]
