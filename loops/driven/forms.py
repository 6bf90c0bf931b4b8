from django import forms

from recipes.formats.rule_context import ID_PATTERN

from .models import Loop


class LoopFilterForm(forms.Form):
    session = forms.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, label="Run", help_text="A run's id"
    )
    agent = forms.RegexField(regex=ID_PATTERN, required=False, max_length=300)
    status = forms.ChoiceField(required=False, choices=[("", "any")] + list(Loop.Status.choices))
    before = forms.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1, widget=forms.HiddenInput
    )
