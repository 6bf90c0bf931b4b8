import pytest

from runs.engine.completion import (
    CHANNELS,
    detect_signal,
    gate_text,
    should_check_until_bash,
    status_line,
    strip_signal_tags,
    until_field_met,
)

# --- detect_signal: tag form ----------------------------------------------------


def test_tag_form_detected_mid_output():
    assert detect_signal("Did work.\n<promise>COMPLETE</promise>\nMore text follows.", "COMPLETE")


def test_tag_form_case_insensitive_signal():
    assert detect_signal("<promise>complete</promise>", "COMPLETE")


def test_tag_form_case_insensitive_tag():
    assert detect_signal("<PROMISE>Complete</Promise>", "COMPLETE")


def test_tag_form_whitespace_inside_tags():
    assert detect_signal("ok <promise>  complete \n</promise> bye", "COMPLETE")


def test_tag_form_other_signal_does_not_match():
    assert not detect_signal("<promise>DONE</promise> and more", "COMPLETE")


def test_tag_form_requires_whole_signal():
    assert not detect_signal("<promise>COMPLETELY</promise> then more", "COMPLETE")


def test_signal_with_regex_metacharacters():
    assert detect_signal("<promise>a.b*c?</promise> x", "a.b*c?")
    assert not detect_signal("<promise>aXbbc</promise> x", "a.b*c?")


# --- detect_signal: plain fallback ----------------------------------------------


def test_plain_signal_at_very_end():
    assert detect_signal("All stories implemented. COMPLETE", "COMPLETE")


def test_plain_signal_at_end_with_trailing_punctuation_and_whitespace():
    assert detect_signal("…done. COMPLETE.  \n\n", "COMPLETE")
    assert detect_signal("finished **COMPLETE**!", "COMPLETE")


def test_plain_signal_alone_on_its_own_line():
    assert detect_signal("Step 1 ok\n   COMPLETE  \nSummary follows below.", "COMPLETE")


def test_plain_signal_own_line_with_crlf():
    assert detect_signal("a\r\nCOMPLETE\r\nb", "COMPLETE")


def test_mention_mid_sentence_is_not_a_signal():
    assert not detect_signal("I will output COMPLETE when done, not yet.", "COMPLETE")


def test_plain_signal_is_case_sensitive():
    assert not detect_signal("we are complete", "COMPLETE")
    assert not detect_signal("x\ncomplete\ny", "COMPLETE")


def test_plain_signal_needs_word_boundary():
    assert not detect_signal("the work is INCOMPLETE", "COMPLETE")


def test_plain_signal_on_line_with_other_words_not_at_end():
    assert not detect_signal("Status: COMPLETE\nbut there is more", "COMPLETE")


def test_empty_signal_never_matches():
    assert not detect_signal("anything", "")
    assert not detect_signal("", "COMPLETE")


def test_signal_with_surrounding_spaces_in_config():
    assert detect_signal("work\nDONE", " DONE ")


# --- strip_signal_tags --------------------------------------------------------------


def test_strip_removes_tag_line_and_tidies_blank_lines():
    text = "Para one.\n\n<promise>COMPLETE</promise>\n\nPara two.\n"
    assert strip_signal_tags(text) == "Para one.\n\nPara two."


def test_strip_removes_inline_tag_and_trailing_space():
    assert strip_signal_tags("All done. <promise>COMPLETE</promise>\n") == "All done."


def test_strip_any_content_and_case_and_multiline():
    text = "A\n<PROMISE>\n  whatever\n</Promise>\nB"
    assert strip_signal_tags(text) == "A\nB"


def test_strip_removes_every_tag():
    assert strip_signal_tags("<promise>x</promise>a <promise>y</promise>b") == "a b"


def test_strip_leading_tag_leaves_no_leading_blank_line():
    assert strip_signal_tags("<promise>DONE</promise>\n\nBody") == "Body"


def test_strip_without_tags_only_strips_trailing_whitespace():
    text = "  keep indent\n\n\n\nkeep gaps  \n\n"
    assert strip_signal_tags(text) == "  keep indent\n\n\n\nkeep gaps"


def test_strip_only_tag_yields_empty():
    assert strip_signal_tags("<promise>COMPLETE</promise>") == ""


# --- until_field_met -----------------------------------------------------------------


def test_until_field_true_ends():
    assert until_field_met({"done": True}, "done")


@pytest.mark.parametrize("value", [False, "true", 1, "yes", None, [True], {"x": True}])
def test_until_field_only_identity_true(value):
    assert not until_field_met({"done": value}, "done")


def test_until_field_missing_or_non_object():
    assert not until_field_met({}, "done")
    assert not until_field_met([{"done": True}], "done")
    assert not until_field_met(None, "done")
    assert not until_field_met(True, "done")


# --- status_line / gate_text ------------------------------------------------------------


def test_channels_names():
    assert CHANNELS == ("until", "until_field", "until_bash")


def test_status_one_channel_in_plain_words():
    assert status_line(["until"], ["until", "until_bash"], signal="DONE") == "The agent said DONE."
    assert status_line(["until"], ["until"]) == "The agent said it was done."


def test_status_several_channels():
    line = status_line(["until_bash", "until"], ["until", "until_bash"], signal="DONE")
    assert line == "The agent said DONE and the check command passed."


def test_status_none_fired_says_what_would_end_it():
    line = status_line([], ["until_bash", "until"], signal="DONE")
    assert line == (
        "The agent did not say it was done in this iteration "
        "(it would end when the agent said DONE or the check command passed)."
    )


def test_status_field_channel_names_the_field():
    line = status_line(["until_field"], ["until_field"], field="finished")
    assert line == "The agent's answer set finished to true."


def test_status_has_no_emoji():
    for line in (status_line(["until"], ["until"]), status_line([], ["until"])):
        assert all(ord(ch) < 0x2000 for ch in line), line


def test_status_deduplicates_fired():
    assert status_line(["until", "until"], ["until"], signal="OK") == "The agent said OK."


def test_gate_text_layout():
    text = gate_text(
        fired=["until"],
        declared=["until"],
        output="the output",
        gate_message="Review it.",
        signal="DONE",
    )
    assert text == "The agent said DONE.\n\nthe output\n\nReview it."


def test_gate_text_excerpt_is_tail_with_ellipsis():
    output = "HEAD" + "x" * 50 + "TAIL"
    text = gate_text(
        fired=[], declared=["until"], output=output, gate_message="G", excerpt_chars=10
    )
    status, excerpt, msg = text.split("\n\n")
    assert status.startswith("The agent did not say it was done")
    assert excerpt == "…" + output[-10:]
    assert excerpt.endswith("TAIL") and "HEAD" not in excerpt
    assert msg == "G"


def test_gate_text_short_output_not_truncated():
    text = gate_text(fired=[], declared=["until"], output="x" * 2000, gate_message="G")
    assert text.split("\n\n")[1] == "x" * 2000


def test_gate_text_default_bound():
    text = gate_text(fired=[], declared=["until"], output="y" * 5000, gate_message="G")
    assert text.split("\n\n")[1] == "…" + "y" * 2000


def test_gate_text_empty_output_placeholder():
    text = gate_text(fired=[], declared=["until_bash"], output="  \n", gate_message="G")
    assert text.split("\n\n")[1] == "(no output)"


def test_gate_text_starts_with_status_line():
    text = gate_text(fired=["until_bash"], declared=["until_bash"], output="o", gate_message="m")
    assert text.startswith("The check command passed.\n\n")


# --- until_bash short-circuit ------------------------------------------------------------


def test_until_bash_checked_only_when_nothing_fired():
    assert should_check_until_bash([])
    assert not should_check_until_bash(["until"])
    assert not should_check_until_bash(["until_field"])
