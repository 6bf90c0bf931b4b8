"""`{{ inputs.task_key }}` is "the task key (if provided)": absent, it prints nothing, and
`default()` and `{% if %}` still see it as absent. Any other absent input stays an error."""

import pytest

from loops.stepmachine.context import OPTIONAL_INPUTS
from loops.stepmachine.rendering import Namespace, RenderError, render


def inputs(**values):
    return {"inputs": Namespace("inputs", values, optional=OPTIONAL_INPUTS)}


def test_an_absent_task_key_prints_nothing():
    assert render("Task: [{{ inputs.task_key }}]", inputs(goal="g")) == "Task: []"
    assert render("Task: [{{ inputs.task_key }}]", inputs(task_key="LC-7")) == "Task: [LC-7]"


def test_default_and_if_still_see_an_absent_task_key():
    context = inputs(goal="g")
    assert render("{{ inputs.task_key | default('none') }}", context) == "none"
    assert render("{% if inputs.task_key %}Task{% endif %}done", context) == "done"


def test_another_absent_input_is_still_an_error():
    with pytest.raises(RenderError, match=r"inputs\.ticket is undefined"):
        render("{{ inputs.ticket }}", inputs(goal="g"))
