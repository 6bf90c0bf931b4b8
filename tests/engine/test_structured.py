import json

import pytest

from runs.engine.structured import (
    extract_json,
    reask_prompt,
    schema_prompt_suffix,
    validate_payload,
)

SCHEMA = {
    "type": "object",
    "properties": {
        "done": {"type": "boolean"},
        "remaining": {"type": "integer"},
        "items": {"type": "array", "items": {"type": "object", "required": ["name"]}},
    },
    "required": ["done"],
    "additionalProperties": False,
}

# --- extract_json ----------------------------------------------------------------------


def test_bare_json_document():
    assert extract_json('{"done": true}') == ({"done": True}, None)


def test_bare_json_with_surrounding_whitespace():
    assert extract_json('\n  {"done": false}\n\n') == ({"done": False}, None)


def test_bare_json_array_document():
    assert extract_json("[1, 2]") == ([1, 2], None)


def test_bare_null_is_success_not_error():
    assert extract_json("null") == (None, None)


def test_fenced_json_block():
    text = 'Here you go:\n```json\n{"done": true, "remaining": 0}\n```\nThanks!'
    assert extract_json(text) == ({"done": True, "remaining": 0}, None)


def test_last_fenced_json_block_wins():
    text = '```json\n{"n": 1}\n```\nrevised:\n```json\n{"n": 2}\n```'
    assert extract_json(text) == ({"n": 2}, None)


def test_fence_language_case_insensitive():
    assert extract_json('x\n```JSON\n{"n": 1}\n```') == ({"n": 1}, None)


def test_json_fence_preferred_over_later_unlabelled_fence():
    text = '```json\n{"n": 1}\n```\n```\nnot json here\n```'
    assert extract_json(text) == ({"n": 1}, None)


def test_unlabelled_fence_used_when_no_json_fence():
    assert extract_json('x\n```\n{"n": 3}\n```\ny') == ({"n": 3}, None)


def test_invalid_last_json_fence_falls_back_to_earlier_valid_one():
    text = '```json\n{"n": 1}\n```\n```json\n{"n": oops}\n```'
    assert extract_json(text) == ({"n": 1}, None)


def test_last_object_in_prose():
    text = 'First {"n": 1} then finally {"n": 2, "inner": {"k": "v"}} done.'
    assert extract_json(text) == ({"n": 2, "inner": {"k": "v"}}, None)


def test_last_object_returns_outer_not_nested():
    text = 'Result: {"outer": {"inner": 1}} end'
    assert extract_json(text) == ({"outer": {"inner": 1}}, None)


def test_braces_inside_strings_handled():
    text = 'note {not json} and {"msg": "a } b {"}'
    assert extract_json(text) == ({"msg": "a } b {"}, None)


def test_no_json_gives_error():
    payload, error = extract_json("I could not decide.")
    assert payload is None
    assert error == "no JSON document found in output"


def test_empty_output_gives_error():
    payload, error = extract_json("   ")
    assert payload is None and "empty" in error


def test_broken_fence_reports_error():
    payload, error = extract_json("```json\n{oops\n```")
    assert payload is None and "not valid JSON" in error


# --- validate_payload ------------------------------------------------------------------------


def test_valid_payload_has_no_errors():
    assert validate_payload(SCHEMA, {"done": True, "remaining": 3}) == []


def test_missing_required_reported_at_root():
    assert validate_payload(SCHEMA, {"remaining": 1}) == ["$: 'done' is a required property"]


def test_wrong_type_reported_with_path():
    errors = validate_payload(SCHEMA, {"done": "true"})
    assert errors == ["$.done: 'true' is not of type 'boolean'"]


def test_nested_array_path():
    errors = validate_payload(SCHEMA, {"done": False, "items": [{"name": "a"}, {}]})
    assert errors == ["$.items[1]: 'name' is a required property"]


def test_multiple_errors_sorted_by_path():
    errors = validate_payload(SCHEMA, {"done": 1, "remaining": "x"})
    assert [e.split(":")[0] for e in errors] == ["$.done", "$.remaining"]


def test_non_object_payload():
    errors = validate_payload(SCHEMA, [1])
    assert errors == ["$: [1] is not of type 'object'"]


def test_additional_property_reported():
    errors = validate_payload(SCHEMA, {"done": True, "extra": 1})
    assert len(errors) == 1 and errors[0].startswith("$: Additional properties")


def test_invalid_schema_reported():
    errors = validate_payload({"type": "nonsense"}, {})
    assert len(errors) == 1 and errors[0].startswith("schema: ")


# --- prompts ---------------------------------------------------------------------------------


def test_schema_prompt_suffix_embeds_schema_and_required():
    suffix = schema_prompt_suffix(SCHEMA)
    assert suffix.startswith("\n\n")
    assert json.dumps(SCHEMA, indent=2) in suffix
    assert "Required properties: done." in suffix
    assert "JSON" in suffix


def test_schema_prompt_suffix_without_required():
    suffix = schema_prompt_suffix({"type": "object"})
    assert "Required properties" not in suffix


def test_reask_prompt_lists_every_error_and_schema():
    errors = ["$.done: 'true' is not of type 'boolean'", "$: 'x' is a required property"]
    prompt = reask_prompt(errors, SCHEMA)
    for err in errors:
        assert f"- {err}" in prompt
    assert json.dumps(SCHEMA, indent=2) in prompt


def test_reask_prompt_with_no_errors_mentions_missing_json():
    assert "no JSON document" in reask_prompt([], SCHEMA)


@pytest.mark.parametrize("payload", [{"done": True}, {"done": False, "remaining": 2}])
def test_extract_then_validate_round_trip(payload):
    text = "reasoning...\n```json\n" + json.dumps(payload) + "\n```"
    extracted, error = extract_json(text)
    assert error is None
    assert validate_payload(SCHEMA, extracted) == []
