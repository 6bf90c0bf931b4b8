from django import forms

from runs.models import Run
from runs.models.gate import COMMENT_LIMIT

TOO_LONG = (
    f"Feedback is limited to {COMMENT_LIMIT:,} characters; this has %(show_value)s. "
    "Shorten it and send again."
)


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *Run.Status.choices])
    recipe = forms.ChoiceField(required=False)
    q = forms.CharField(required=False, max_length=200, label="Search messages")
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, recipes=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["recipe"].choices = [("", "Any recipe"), *((slug, slug) for slug, _ in recipes)]


class ApproveForm(forms.Form):
    comment = forms.CharField(
        required=False, max_length=COMMENT_LIMIT, error_messages={"max_length": TOO_LONG}
    )
    decision = forms.CharField(required=False, max_length=100)


class RejectForm(forms.Form):
    reason = forms.CharField(
        required=False, max_length=COMMENT_LIMIT, error_messages={"max_length": TOO_LONG}
    )
