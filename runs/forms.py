from django import forms

from runs.models import Run
from runs.models.gate import COMMENT_LIMIT


class LineText(forms.CharField):
    """Text from a textarea: browsers send each line break as CRLF; it is one character, as
    the page's counter counts it (static/js/console-gate.js), and is kept as a newline."""

    def __init__(self, *, what: str, limit: int = COMMENT_LIMIT, **kwargs):
        self.what, self.limit = what, limit
        super().__init__(required=False, **kwargs)

    def to_python(self, value):
        return super().to_python(value).replace("\r\n", "\n")

    def validate(self, value):
        super().validate(value)
        if len(value) > self.limit:
            raise forms.ValidationError(
                f"{self.what} is limited to {self.limit:,} characters; this has "
                f"{len(value):,}. Shorten it and send again.",
                code="max_length",
            )


class RunFilterForm(forms.Form):
    # The statuses a run shows: the kernel's and each kind's phases (set in __init__, once
    # the kinds are registered).
    status = forms.ChoiceField(
        required=False,
        error_messages={"invalid_choice": "No run has the status “%(value)s”."},
    )
    recipe = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "There is no recipe “%(value)s”."}
    )
    # The projects the person may see (set in __init__): another's reads as none at all.
    project = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "There is no project “%(value)s”."}
    )
    q = forms.CharField(required=False, max_length=200, label="Search messages")
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, recipes=(), projects=(), **kwargs):
        super().__init__(*args, **kwargs)
        words = [(word, word.replace("_", " ").title()) for word in Run.status_words()]
        self.fields["status"].choices = [("", "Any status"), *words]
        self.fields["recipe"].choices = [("", "Any recipe"), *((slug, slug) for slug, _ in recipes)]
        self.fields["project"].choices = [("", "Any project"), *projects]


class ApproveForm(forms.Form):
    comment = LineText(what="Feedback")
    decision = forms.CharField(required=False, max_length=100)
    digest = forms.CharField(required=False, max_length=64)


class RespondForm(forms.Form):
    decision = forms.CharField(max_length=100)
    text = LineText(what="The text")
    digest = forms.CharField(required=False, max_length=64)


class RejectForm(forms.Form):
    reason = LineText(what="A reason")
    digest = forms.CharField(required=False, max_length=64)
