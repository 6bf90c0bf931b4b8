"""The Start-run form: the message plus one typed field per input the recipe declares.

The fields only shape the page; the values, the message too, are validated by the service
(`runs.services.start_run`: `message_problem`, `recipes.inputs.clean_inputs`, the budget),
whose errors are put back beside the fields they belong to.
"""

from django import forms

from recipes.formats.budget import LIMITS
from recipes.formats.budget import title as budget_title
from runs.budget import error_words
from runs.services import MESSAGE_LIMIT

FIELD_PREFIX = "input_"
BUDGET_PREFIX = "budget_"
MESSAGE_COUNTER = "message-limit"


class MessageText(forms.CharField):
    """The message as its counter counts it (static/js/console-gate.js): a line break, which
    a browser sends as CRLF, is one character. Never cut: its bound is the service's."""

    def to_python(self, value):
        return super().to_python(value).replace("\r\n", "\n")


def _field(spec, branches: list[str] | None = None) -> forms.Field:
    common = {
        "required": False,
        "label": spec.label,
        "help_text": spec.description or "",
        "initial": spec.default,
    }
    attrs = {"required": True} if spec.required and spec.type != "boolean" else {}
    if spec.type == "boolean":
        return forms.BooleanField(**common)
    if spec.type == "branch" and branches is not None:
        # The branches of the run's repository (a step machine's start form).
        choices = [(name, name) for name in branches]
        if spec.default is not None and spec.default not in branches:
            common["initial"] = None
        if not spec.required or spec.default is None:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, widget=forms.Select(attrs=attrs), **common)
    if spec.type == "select":
        choices = [(option.value, option.label) for option in spec.options]
        if not spec.required and spec.default is None:
            choices = [("", "—"), *choices]
        return forms.ChoiceField(choices=choices, widget=forms.Select(attrs=attrs), **common)
    if spec.type == "number":
        return forms.CharField(widget=forms.NumberInput(attrs={"step": "any", **attrs}), **common)
    if spec.type == "textarea":
        return forms.CharField(widget=forms.Textarea(attrs={"rows": 4, **attrs}), **common)
    return forms.CharField(widget=forms.TextInput(attrs=attrs), **common)


class StartRunForm(forms.Form):
    message = MessageText(
        required=False,
        widget=forms.Textarea(
            attrs={
                "rows": 3,
                "data-limit": MESSAGE_LIMIT,
                "data-limit-refusal": "the run does not start",
                "aria-describedby": f"{MESSAGE_COUNTER} id_message_helptext",
            }
        ),
        help_text="What this run is about ($USER_MESSAGE in the recipe).",
    )
    message_counter = MESSAGE_COUNTER
    message_limit_text = f"{MESSAGE_LIMIT:,}"

    def __init__(
        self,
        *args,
        declared: dict,
        needs_message: bool = False,
        budget=None,
        repositories: list[str] | None = None,
        repository: str = "",
        branches: list[str] | None = None,
        **kwargs,
    ):
        super().__init__(*args, **kwargs)
        self.declared = declared
        if repositories is not None:
            self._step_machine(declared, repositories, repository)
        if needs_message and "message" in self.fields:  # the service refuses an empty one
            self.fields["message"].widget.attrs["required"] = True
        names = sorted(declared) if repositories is not None else list(declared)
        for name in names:
            field = _field(declared[name], branches)
            field.label = field.label or name
            self.fields[FIELD_PREFIX + name] = field
        soft = (budget or {}).get("soft") or []
        for name in LIMITS:  # the recipe's limits, which a person may change for this run
            self.fields[BUDGET_PREFIX + name] = forms.CharField(
                required=False,
                label=budget_title(name),
                initial=(budget or {}).get(name, ""),
                help_text=_budget_help(name, soft),
                widget=forms.TextInput(attrs={"inputmode": "decimal", "size": 12}),
            )

    def budget_fields(self):
        return [self[BUDGET_PREFIX + name] for name in LIMITS]

    def other_fields(self):
        return [f for f in self if not f.name.startswith(BUDGET_PREFIX) and not f.is_hidden]

    def raw_budget(self) -> dict:
        return {name: self.cleaned_data.get(BUDGET_PREFIX + name) or "" for name in LIMITS}

    def _step_machine(self, declared: dict, repositories: list[str], repository: str) -> None:
        """A step machine works on a repository (its branch inputs list its branches); its
        inputs come in alphabetical order; the message is the run's goal."""
        choices = [(path, path) for path in repositories]
        self.fields = {
            # Chosen above the form (which reloads with its branches); sent along hidden.
            "repository": forms.ChoiceField(
                choices=[("", "—"), *choices],
                required=False,
                initial=repository,
                widget=forms.HiddenInput,
            ),
            **self.fields,
        }
        message = self.fields["message"]
        message.label = "Goal"
        message.help_text = "What this run is about ({{ inputs.goal }} in the recipe)."
        if "goal" in declared:
            del self.fields["message"]

    @property
    def repository(self) -> str:
        return self.cleaned_data.get("repository") or ""

    def raw_inputs(self) -> dict:
        return {name: self.cleaned_data.get(FIELD_PREFIX + name) for name in self.declared}

    def add_input_errors(self, errors: dict) -> None:
        """The service's errors, each beside its field: the message's and a limit's in the
        words every page uses (a limit's: runs.budget.error_words), an input's named."""
        for name, message in errors.items():
            key, text = FIELD_PREFIX + name, f"{name}: {message}"
            if name == "message":
                key, text = name, message
            elif name.startswith("budget."):
                key, text = BUDGET_PREFIX + name.removeprefix("budget."), error_words(name, message)
            self.add_error(key if key in self.fields else None, text)


def _budget_help(name: str, soft: list[str]) -> str:
    """A limit's hint on the start form: the recipe's soft ones say what they do."""
    if name in soft:
        return "Soft: reaching it asks whether to go on, with a forecast."
    return "Empty: no limit." if name == LIMITS[-1] else ""
