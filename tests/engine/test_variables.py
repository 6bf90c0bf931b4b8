import subprocess

import pytest

from runs.engine.variables import (
    NodeOutput,
    VarContext,
    VariableError,
    substitute,
    substitute_shell,
)

REVIEW_SCHEMA = {
    "type": "object",
    "properties": {
        "score": {"type": "integer"},
        "ready": {"type": "boolean"},
        "note": {"type": ["string", "null"]},
        "tags": {"type": "array"},
        "meta": {"type": "object"},
        "ratio": {"type": "number"},
    },
}


def ctx(**kw):
    outputs = kw.pop("node_outputs", {})
    known = kw.pop("known_nodes", None)
    if known is None:
        known = frozenset(outputs) | frozenset(kw.get("loop_prev") or {})
    return VarContext(node_outputs=outputs, known_nodes=frozenset(known), **kw)


def shell_sub(template, c):
    return substitute_shell(template, c)


def review(payload=None, schema=REVIEW_SCHEMA, text="prose"):
    if payload is None:
        payload = {"score": 80, "ready": True, "note": None, "tags": ["a", "b"]}
    return NodeOutput(text=text, structured=payload, schema=schema)


# --- built-in variables ---------------------------------------------------


def test_arguments_and_user_message_are_the_user_message():
    c = ctx(user_message="fix the bug")
    assert substitute("$ARGUMENTS|$USER_MESSAGE", c) == "fix the bug|fix the bug"


@pytest.mark.parametrize(
    ("name", "attr", "value"),
    [
        ("ARTIFACTS_DIR", "artifacts_dir", "/tmp/art"),
        ("BASE_BRANCH", "base_branch", "main"),
        ("DOCS_DIR", "docs_dir", "documentation/"),
        ("WORKFLOW_ID", "workflow_id", "run-42"),
        ("LOOP_USER_INPUT", "loop_user_input", "please add tests"),
        ("LOOP_PREV_OUTPUT", "loop_prev_output", "previous pass"),
    ],
)
def test_named_variable(name, attr, value):
    assert substitute(f"<${name}>", ctx(**{attr: value})) == f"<{value}>"


def test_docs_dir_defaults_to_docs():
    assert substitute("$DOCS_DIR", VarContext()) == "docs/"


def test_loop_variables_empty_by_default():
    assert substitute("[$LOOP_USER_INPUT][$LOOP_PREV_OUTPUT]", VarContext()) == "[][]"


def test_word_boundary_longer_name_untouched():
    c = ctx(user_message="hi")
    assert substitute("$USER_MESSAGEX $USER_MESSAGE_2", c) == "$USER_MESSAGEX $USER_MESSAGE_2"


def test_name_followed_by_punctuation_is_substituted():
    assert substitute("($USER_MESSAGE).", ctx(user_message="hi")) == "(hi)."


def test_unknown_dollar_names_pass_through():
    script = 'echo $HOME $1 $(date) ${x} $$ $? $@ "$PATH" $ cost: $5'
    assert substitute(script, ctx(user_message="m")) == script


def test_values_are_not_rescanned():
    c = ctx(user_message="$WORKFLOW_ID", workflow_id="w1")
    assert substitute("$USER_MESSAGE", c) == "$WORKFLOW_ID"


# --- $INPUTS ----------------------------------------------------------------


def test_inputs_string():
    assert substitute("$INPUTS.request", ctx(inputs={"request": "do it"})) == "do it"


def test_inputs_typed_values_rendered():
    c = ctx(inputs={"n": 3, "flag": False, "none": None, "items": [1, "x"]})
    assert substitute("$INPUTS.n $INPUTS.flag [$INPUTS.none] $INPUTS.items", c) == (
        '3 false [] [1,"x"]'
    )


def test_unknown_input_left_untouched():
    assert substitute("$INPUTS.missing", ctx(inputs={"a": "1"})) == "$INPUTS.missing"


# --- $node.output -----------------------------------------------------------


def test_node_output_text():
    c = ctx(node_outputs={"setup": NodeOutput("Found 3 stories", None, None)})
    assert substitute("ctx: $setup.output", c) == "ctx: Found 3 stories"


def test_node_id_with_hyphen():
    c = ctx(node_outputs={"fix-loop": NodeOutput("done", None, None)})
    assert substitute("$fix-loop.output", c) == "done"


def test_unknown_node_left_untouched():
    c = ctx(node_outputs={"a": NodeOutput("x", None, None)})
    assert substitute("$b.output and $b.output.field", c) == "$b.output and $b.output.field"


def test_known_node_without_output_is_empty():
    c = ctx(known_nodes={"skipped"})
    assert substitute("[$skipped.output]", c) == "[]"


def test_known_node_without_output_field_access_is_empty():
    c = ctx(known_nodes={"skipped"})
    assert substitute("[$skipped.output.score]", c) == "[]"


def test_structured_output_renders_compact_json_in_key_order():
    c = ctx(node_outputs={"review": review({"z": 1, "a": "é"}, schema=None)})
    assert substitute("$review.output", c) == '{"z":1,"a":"é"}'


def test_output_suffix_is_not_part_of_reference():
    c = ctx(node_outputs={"a": NodeOutput("X", None, None)})
    assert substitute("$a.outputs", c) == "$a.outputs"


def test_trailing_dot_after_output_is_kept():
    c = ctx(node_outputs={"a": NodeOutput("X", None, None)})
    assert substitute("See $a.output. Then $a.output.", c) == "See X. Then X."


def test_trailing_dot_before_non_identifier():
    c = ctx(node_outputs={"a": NodeOutput("X", None, None)})
    assert substitute("$a.output.-x $a.output.\n", c) == "X.-x X.\n"


# --- field access -----------------------------------------------------------


@pytest.mark.parametrize(
    ("fld", "expected"),
    [
        ("score", "80"),
        ("ready", "true"),
        ("note", ""),
        ("tags", '["a","b"]'),
        ("meta", ""),
    ],
)
def test_structured_field_rendering(fld, expected):
    c = ctx(node_outputs={"review": review()})
    assert substitute(f"$review.output.{fld}", c) == expected


def test_field_false_and_float_and_object():
    payload = {"ready": False, "ratio": 0.5, "meta": {"k": [1, None]}}
    c = ctx(node_outputs={"review": review(payload)})
    assert substitute("$review.output.ready $review.output.ratio $review.output.meta", c) == (
        'false 0.5 {"k":[1,null]}'
    )


def test_field_not_in_schema_raises_naming_reference():
    c = ctx(node_outputs={"review": review()})
    with pytest.raises(VariableError) as exc:
        substitute("score: $review.output.scor", c)
    msg = str(exc.value)
    assert msg.startswith("$review.output.scor: field 'scor' is not in review's output_format")


def test_field_without_schema_properties_is_lenient():
    c = ctx(node_outputs={"n": review({"a": 1}, schema={"type": "object"})})
    assert substitute("[$n.output.a][$n.output.b]", c) == "[1][]"


def test_field_on_plain_text_json_object():
    c = ctx(node_outputs={"t": NodeOutput('  {"ready": true, "n": 2}\n', None, None)})
    assert substitute("$t.output.ready/$t.output.n", c) == "true/2"


def test_field_on_non_json_text_raises():
    c = ctx(node_outputs={"t": NodeOutput("green", None, None)})
    with pytest.raises(VariableError, match=r"^\$t\.output\.ready: "):
        substitute("$t.output.ready", c)


def test_field_on_json_array_raises():
    c = ctx(node_outputs={"t": NodeOutput("[1, 2]", None, None)})
    with pytest.raises(VariableError, match="not an object"):
        substitute("$t.output.x", c)


def test_field_with_hyphen_tail_is_field_then_text():
    c = ctx(node_outputs={"review": review()})
    assert substitute("$review.output.score-based", c) == "80-based"


# --- $LOOP_PREV -------------------------------------------------------------


def test_loop_prev_on_first_iteration_is_empty():
    c = ctx(known_nodes={"test"}, loop_prev=None)
    assert substitute("[$LOOP_PREV.test.output][$LOOP_PREV.test.output.x]", c) == "[][]"


def test_loop_prev_empty_dict_is_first_iteration():
    c = ctx(known_nodes={"test"}, loop_prev={})
    assert substitute("[$LOOP_PREV.test.output]", c) == "[]"


def test_loop_prev_text():
    c = ctx(
        node_outputs={"test": NodeOutput("green", None, None)},
        loop_prev={"test": NodeOutput("red", None, None)},
    )
    assert substitute("$LOOP_PREV.test.output -> $test.output", c) == "red -> green"


def test_loop_prev_field_strict():
    c = ctx(known_nodes={"review"}, loop_prev={"review": review()})
    assert substitute("$LOOP_PREV.review.output.score", c) == "80"
    with pytest.raises(VariableError, match=r"^\$LOOP_PREV\.review\.output\.nope: field 'nope'"):
        substitute("$LOOP_PREV.review.output.nope", c)


def test_loop_prev_unknown_node_untouched():
    c = ctx(known_nodes={"a"}, loop_prev={"a": NodeOutput("x", None, None)})
    assert substitute("$LOOP_PREV.zzz.output", c) == "$LOOP_PREV.zzz.output"


def test_loop_prev_known_node_missing_from_previous_iteration_is_empty():
    c = ctx(known_nodes={"a", "b"}, loop_prev={"a": NodeOutput("x", None, None)})
    assert substitute("[$LOOP_PREV.b.output]", c) == "[]"


def test_loop_prev_output_not_confused_with_loop_prev_ref():
    c = ctx(known_nodes={"a"}, loop_prev_output="P", loop_prev={"a": NodeOutput("A", None, None)})
    assert substitute("$LOOP_PREV_OUTPUT $LOOP_PREV.a.output", c) == "P A"


# --- shell mode ---------------------------------------------------------------


def test_shell_mode_values_travel_in_the_environment():
    c = ctx(
        user_message="a b",
        artifacts_dir="/tmp/x y",
        inputs={"q": "it's"},
        node_outputs={"n": NodeOutput("$(id)", None, None)},
    )
    script, env = shell_sub('echo $USER_MESSAGE "$ARTIFACTS_DIR" $INPUTS.q "x $n.output"', c)
    assert script == 'echo "${LOOP_V_1}" "${LOOP_V_2}" "${LOOP_V_3}" "x ${LOOP_V_4}"'
    assert env == {
        "LOOP_V_1": "a b",
        "LOOP_V_2": "/tmp/x y",
        "LOOP_V_3": "it's",
        "LOOP_V_4": "$(id)",
    }


def test_shell_mode_empty_value_is_empty_word():
    c = ctx(known_nodes={"skipped"})
    assert shell_sub("test $skipped.output = green", c) == (
        'test "${LOOP_V_1}" = green',
        {"LOOP_V_1": ""},
    )


def test_shell_mode_leaves_script_variables_alone():
    script = 'for f in "$@"; do echo "$HOME/$f" $1 ${x:-y} $(pwd); done'
    assert shell_sub(script, ctx()) == (script, {})


def test_shell_mode_refuses_arithmetic_with_line_and_suggestion():
    c = ctx(user_message="a[$(touch x)]")
    with pytest.raises(
        VariableError,
        match=r"line 2: \$USER_MESSAGE is inside arithmetic.*\[ \"\$USER_MESSAGE\" -gt 3 \]",
    ):
        shell_sub("echo ok\n(( $USER_MESSAGE + 1 ))", c)


PAYLOADS = [
    "$(touch MARKER)",
    "`touch MARKER`",
    "; touch MARKER",
    "&& touch MARKER",
    "|| touch MARKER",
    "| tee MARKER",
    "> MARKER",
    ">> MARKER",
    "< /etc/passwd",
    "a\ntouch MARKER",
    "\ntouch MARKER\n",
    "'; touch MARKER; echo '",
    '"; touch MARKER; echo "',
    "\\'$(touch MARKER)\\'",
    "$IFS",
    "a${IFS}b",
    "$HOME",
    "${HOME}",
    "*",
    "/*",
    "?",
    "[a-z]*",
    "-e",
    "-n",
    "--help",
    "-- -x",
    "~",
    "~root",
    "!!",
    "{a,b}",
    "x=1 touch MARKER",
    "héllo wörld ✓ 🚀 — ünïcode",
    "tab\there",
    "trailing newline\n\n",
    "",
    " ",
    "'",
    '"',
    "\\",
    "$((1+1))",
    "<(touch MARKER)",
    "$'\\x41'",
    "& touch MARKER &",
    "#comment",
    "A" * 15_000,
    "$(touch MARKER)" * 500 + "\n; `touch MARKER`",
]


@pytest.mark.parametrize("payload", PAYLOADS, ids=range(len(PAYLOADS)))
def test_shell_injection_payload_arrives_verbatim(tmp_path, payload):
    c = ctx(
        user_message=payload,
        inputs={"p": payload},
        node_outputs={"evil": NodeOutput(payload, None, None)},
        loop_prev={"evil": NodeOutput(payload, None, None)},
        known_nodes={"evil"},
    )
    script = (
        "X=$evil.output\n"
        'printf %s "$X" > out1\n'
        "printf %s $USER_MESSAGE > out2\n"
        "Y=$LOOP_PREV.evil.output; Z=$INPUTS.p\n"
        'printf %s "$Y" > out3; printf %s "$Z" > out4\n'
        'test "$X" = $evil.output && echo same > out5\n'
    )
    rendered, values = shell_sub(script, c)
    proc = subprocess.run(
        ["bash", "-c", rendered],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LC_ALL": "C.UTF-8", **values},
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    expected = payload.encode()
    for name in ("out1", "out2", "out3", "out4"):
        assert (tmp_path / name).read_bytes() == expected, name
    assert (tmp_path / "out5").read_text() == "same\n"
    assert not (tmp_path / "MARKER").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out1", "out2", "out3", "out4", "out5"]
