"""Structured output (``output_format``): JSON extraction, validation, prompts."""

from __future__ import annotations

import itertools
import json
import re

import jsonschema
from jsonschema.exceptions import SchemaError

__all__ = ["extract_json", "reask_prompt", "schema_prompt_suffix", "validate_payload"]

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\r?\n(.*?)```", re.DOTALL)
_DECODER = json.JSONDecoder()
# Far deeper than any real structured answer, far shallower than Python's recursion limit:
# agent output nested deeper is refused with a clear error instead of a RecursionError.
MAX_JSON_DEPTH = 100
# JSON strings (possibly unterminated) are dropped whole, so that brackets inside them do
# not count toward the depth; then everything but brackets.
_JSON_STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS_RE = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def nesting_depth(text: str) -> int:
    """How deep brackets nest in ``text`` outside JSON strings (linear, at C speed).

    Stray closing brackets in prose can only make the figure smaller; the parsers below
    still catch a RecursionError as a backstop."""
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return 0
    brackets = _NOT_BRACKETS_RE.sub("", _JSON_STRING_RE.sub("", text))
    return max(itertools.accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


def _loads(text: str) -> tuple[bool, object]:
    try:
        return True, json.loads(text)
    except (ValueError, RecursionError):
        return False, None


def _last_object(text: str) -> tuple[bool, object]:
    """Find the last top-level ``{...}`` object embedded in free text."""
    found: tuple[bool, object] = (False, None)
    pos = text.find("{")
    while pos >= 0:
        try:
            value, end = _DECODER.raw_decode(text, pos)
        except (ValueError, RecursionError):
            pos = text.find("{", pos + 1)
            continue
        if isinstance(value, dict):
            found = (True, value)
        pos = text.find("{", end)
    return found


def extract_json(text: str) -> tuple[object | None, str | None]:
    """Pull a JSON payload out of a model reply; return ``(payload, error)``.

    Tried in order: the whole text as one JSON document; the last fenced
    block labelled ``json`` (then the last unlabelled fence) that parses; the
    last top-level ``{...}`` object in the text. ``error`` is None on success
    (so a bare ``null`` document yields ``(None, None)``). Output nesting brackets more
    than ``MAX_JSON_DEPTH`` levels deep is refused before any parsing.
    """
    if not isinstance(text, str) or not text.strip():
        return None, "output is empty; expected a JSON document"
    if nesting_depth(text) > MAX_JSON_DEPTH:
        return None, f"output nests brackets more than {MAX_JSON_DEPTH} levels deep; refused"
    ok, value = _loads(text.strip())
    if ok:
        return value, None

    fences = _FENCE_RE.findall(text)
    for wanted in ("json", ""):
        for lang, body in reversed(fences):
            if lang.lower() != wanted:
                continue
            ok, value = _loads(body.strip())
            if ok:
                return value, None

    ok, value = _last_object(text)
    if ok:
        return value, None
    if fences:
        return None, "a fenced block was found but it is not valid JSON"
    return None, "no JSON document found in output"


def _path(error: jsonschema.ValidationError) -> str:
    path = "$"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def validate_payload(schema: dict, payload: object) -> list[str]:
    """Validate against ``schema``; return ``"path: message"`` strings ([] if valid).

    Paths are JSONPath-like (``$``, ``$.items[0].name``); errors are sorted by
    path for stable output. An invalid schema yields one ``schema: ...`` error.
    """
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        return [f"schema: {exc.message}"]
    validator = cls(schema)
    errors = sorted(validator.iter_errors(payload), key=lambda e: (_path(e), e.message))
    return [f"{_path(e)}: {e.message}" for e in errors]


def _schema_block(schema: dict) -> str:
    return "```json\n" + json.dumps(schema, indent=2, ensure_ascii=False) + "\n```"


def schema_prompt_suffix(schema: dict) -> str:
    """Instructions appended to a best-effort provider's prompt."""
    required = schema.get("required") if isinstance(schema, dict) else None
    lines = [
        "",
        "",
        "## Output format",
        "",
        "Finish your reply with a single JSON document that validates against this JSON Schema:",
        "",
        _schema_block(schema),
    ]
    if isinstance(required, list) and required:
        lines += ["", "Required properties: " + ", ".join(str(r) for r in required) + "."]
    lines += [
        "",
        "Put the JSON in one ```json fenced block, with no comments and no trailing"
        " commas. Booleans must be JSON true/false, not strings.",
    ]
    return "\n".join(lines)


def reask_prompt(errors: list[str], schema: dict) -> str:
    """Follow-up prompt asking the model to repair an invalid payload."""
    listed = "\n".join(f"- {err}" for err in errors) or "- the reply contained no JSON document"
    return "\n".join(
        [
            "Your previous reply did not produce valid structured output.",
            "",
            "Problems found:",
            listed,
            "",
            "Reply again with only the corrected JSON document, in one ```json fenced"
            " block, validating against this JSON Schema:",
            "",
            _schema_block(schema),
        ]
    )
