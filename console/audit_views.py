"""The audit log for administrators: a page, newest first, and its export (CSV, JSON Lines),
both filtered by kind, person, project and dates (console.audit)."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from django import forms
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from console import audit
from console.models import AuditEvent, Project
from console.permissions import administrator_required

PAGE = 50
CONTENT_TYPES = {"jsonl": "application/jsonl", "csv": "text/csv"}


class AuditFilterForm(forms.Form):
    kind = forms.ChoiceField(
        required=False,
        choices=[("", "Any kind"), *AuditEvent.Kind.choices],
        error_messages={"invalid_choice": "No event is of the kind “%(value)s”."},
    )
    person = forms.CharField(required=False, max_length=150, label="Person")
    project = forms.ChoiceField(
        required=False, error_messages={"invalid_choice": "There is no project “%(value)s”."}
    )
    since = forms.DateField(required=False, label="From", widget=forms.DateInput({"type": "date"}))
    until = forms.DateField(required=False, label="To", widget=forms.DateInput({"type": "date"}))
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        projects = Project.objects.values_list("slug", "name")
        self.fields["project"].choices = [("", "Any project"), *projects]

    def filters(self) -> dict:
        """The filters of `console.audit.events`: "to" takes in its whole day."""
        data = self.cleaned_data
        return {
            "kind": data.get("kind", ""),
            "person": data.get("person", "").strip(),
            "project": data.get("project", ""),
            "since": _midnight(data.get("since")),
            "until": _midnight(data["until"] + timedelta(days=1)) if data.get("until") else None,
        }


def _midnight(day) -> datetime | None:
    return None if day is None else timezone.make_aware(datetime.combine(day, time.min))


@require_GET
@administrator_required
def audit_log(request):
    form = AuditFilterForm(request.GET or None)
    events, older = [], None
    if not form.is_bound or form.is_valid():
        found = audit.events(**form.filters()) if form.is_bound else audit.events()
        if form.is_bound and form.cleaned_data.get("before"):
            found = found.filter(pk__lt=form.cleaned_data["before"])
        events = list(found.order_by("-id")[: PAGE + 1])
        if len(events) > PAGE:
            events, older = events[:PAGE], events[PAGE - 1].pk
    query = request.GET.copy()
    query.pop("before", None)
    newest, export = query.urlencode(), query.copy()
    if older:
        query["before"] = older
    return render(
        request,
        "console/audit.html",
        {
            "form": form,
            "events": events,
            "older_query": query.urlencode() if older else "",
            "newest_query": newest if request.GET.get("before") else None,
            "export_query": export.urlencode(),
        },
    )


@require_GET
@administrator_required
def audit_export(request):
    fmt = request.GET.get("format", "jsonl")
    form = AuditFilterForm(request.GET)
    if fmt not in CONTENT_TYPES or not form.is_valid():
        problems = [p for field in form.errors.values() for p in field]
        if fmt not in CONTENT_TYPES:
            problems.append("format: say csv or jsonl.")
        return HttpResponseBadRequest("\n".join(problems), content_type="text/plain")
    response = StreamingHttpResponse(
        audit.lines(audit.events(**form.filters()), fmt), content_type=CONTENT_TYPES[fmt]
    )
    response["Content-Disposition"] = f'attachment; filename="audit.{fmt}"'
    return response
