"""The admin, project by project: a staff account that is no superuser sees, in every
changelist, change form, filter and action, only the rows of the projects where it holds
the model's permission (console.projects) — one rule here, mixed into every app's admin.

A model permission nobody's project role grants (a provider's, a subscription's) is held
globally, but says only which tables a person may handle, not where: for those, the
projects are the ones the person has a role in at all. A row of another project answers
as one that does not exist (404), as on every other surface."""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import FieldDoesNotExist
from django.db.models import ForeignKey, ManyToManyField
from django.http import Http404

from console.models import Project
from console.projects import in_project, projects_where

# What every project role holds: having it in a project is having a role there at all.
SEES_PROJECT = "runs.view_run"


def row_project_id(obj, path: str):
    """The id of the project `obj` belongs to, following `path` ("project",
    "run__project", "pk" for a project itself); None for a row of no project (or a model
    of none: `path` None)."""
    if path is None:
        return None
    *through, last = path.split("__")
    for attribute in through:
        obj = getattr(obj, attribute, None)
        if obj is None:
            return None
    return obj.pk if last == "pk" else getattr(obj, f"{last}_id", None)


class ProjectScopedAdmin(admin.ModelAdmin):
    """`project_field`: the lookup from a row to its project (None: the model has none, as
    a provider's conversations). A row of no project is `shared` (a provider every project
    uses: seen by all who may see the model) or, by default, of every project (seen only by
    who holds the model in every project)."""

    project_field = "project"
    shared = False

    # --- which projects ---------------------------------------------------------------------

    def _perm(self, action: str) -> str:
        opts = self.opts
        return f"{opts.app_label}.{action}_{opts.model_name}"

    def projects_for(self, request, action: str = "view"):
        """The projects where the user may `action` ("view": view or change, as the
        admin's own rule) this model's rows, each a project they have a role in."""
        cache = request.__dict__.setdefault("_admin_projects", {})
        key = (self.opts.label, action)
        if key not in cache:
            user = request.user
            found = projects_where(user, self._perm(action))
            if action == "view":
                found = found | projects_where(user, self._perm("change"))
            cache[key] = found.filter(pk__in=projects_where(user, SEES_PROJECT)).distinct()
        return cache[key]

    def _in_every_project(self, request, action: str) -> bool:
        user = request.user
        held = in_project(user, self._perm(action), None) or (
            action == "view" and in_project(user, self._perm("change"), None)
        )
        return held and in_project(user, SEES_PROJECT, None)

    def _may_row(self, request, obj, action: str) -> bool:
        if obj is None or request.user.is_superuser:
            return True
        project_id = row_project_id(obj, self.project_field)
        if project_id is None:
            return self.shared or self._in_every_project(request, action)
        return self.projects_for(request, action).filter(pk=project_id).exists()

    # --- the rows ---------------------------------------------------------------------------

    def get_queryset(self, request):
        rows = super().get_queryset(request)
        if request.user.is_superuser:
            return rows
        field = self.project_field
        if field is None:
            return rows if self._in_every_project(request, "view") else rows.none()
        mine = rows.filter(**{f"{field}__in": self.projects_for(request)})
        if self.shared or (field != "pk" and self._in_every_project(request, "view")):
            mine = mine | rows.filter(**{f"{field}__isnull": True})
        return mine

    def rows_for(self, request, rows, action: str):
        """`rows` (an action's selection) narrowed to where the user may `action` them."""
        if request.user.is_superuser or self.project_field is None:
            return rows
        return rows.filter(**{f"{self.project_field}__in": self.projects_for(request, action)})

    def has_view_permission(self, request, obj=None):
        return super().has_view_permission(request, obj) and self._may_row(request, obj, "view")

    def has_change_permission(self, request, obj=None):
        allowed = super().has_change_permission(request, obj)
        return allowed and self._may_row(request, obj, "change")

    def has_delete_permission(self, request, obj=None):
        allowed = super().has_delete_permission(request, obj)
        return allowed and self._may_row(request, obj, "delete")

    def _get_obj_does_not_exist_redirect(self, request, opts, object_id):
        # Django's admin redirects to its index for a missing id; a row of another project
        # reads as missing, so both are the console's 404 rather than a hint.
        raise Http404(f"No {opts.verbose_name} {object_id}.")

    # --- what forms and filters offer -------------------------------------------------------

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        choices = self.choices_for(db_field, request)
        if choices is not None:
            kwargs["queryset"] = choices
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def choices_for(self, db_field, request):
        """A form's projects (or recipes): only those where the user may save this row."""
        if request.user.is_superuser:
            return None
        related = db_field.related_model
        if related is Project:
            return self.projects_for(request, self._form_action(request))
        if any(f.name == "project" for f in related._meta.fields):
            projects = self.projects_for(request, self._form_action(request))
            return related._default_manager.filter(project__in=projects)
        return None

    def _form_action(self, request) -> str:
        match = request.resolver_match
        return "change" if match and match.kwargs.get("object_id") else "add"

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        field = form.base_fields.get("project")
        if field is not None and not self._may_leave_empty(request):
            field.required = True  # empty would mean every project: not theirs to give
        return form

    def _may_leave_empty(self, request) -> bool:
        user = request.user
        return user.is_superuser or self._in_every_project(request, self._form_action(request))

    def get_list_filter(self, request):
        """A filter by a related row lists only the rows the narrowed list points to."""
        return [self._related_only(name) for name in super().get_list_filter(request)]

    def _related_only(self, name):
        if not isinstance(name, str) or "__" in name:
            return name
        try:
            field = self.opts.get_field(name)
        except FieldDoesNotExist:  # a method's filter: as it was
            return name
        if isinstance(field, ForeignKey | ManyToManyField):
            return (name, admin.RelatedOnlyFieldListFilter)
        return name
