"""Recipes are edited here: a line-numbered source editor that refuses invalid YAML,
a version history with diffs, and actions to run, validate, export, duplicate and import."""

from __future__ import annotations

import io
import zipfile

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import NoReverseMatch, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.text import slugify

from console.admin_projects import ProjectScopedAdmin
from console.models import Project
from console.projects import default_among
from recipes import diff, editing
from recipes.loader import Problem
from recipes.models import Recipe, RecipeVersion
from recipes.validation import validate_source

MAX_IMPORT_BYTES = 1_000_000


def start_url(slug: str) -> str:
    # The console's start form belongs to the runs pages; fall back to its known address.
    try:
        return reverse("recipe_start", args=[slug])
    except NoReverseMatch:
        return f"/recipes/{slug}/start/"


def stored_problem(data: dict) -> Problem:
    return Problem(
        str(data.get("path") or ""), data.get("line"), data.get("column"), str(data.get("message"))
    )


class SourceEditor(forms.Textarea):
    """A plain textarea that recipe-editor.js turns into a line-numbered editor."""

    class Media:
        css = {"all": ["css/recipe-editor.css"]}
        js = ["js/recipe-editor.js"]

    def __init__(self, attrs=None):
        base = {"class": "recipe-source", "spellcheck": "false", "rows": 30, "wrap": "off"}
        super().__init__({**base, **(attrs or {})})


class RecipeForm(forms.ModelForm):
    note = forms.CharField(
        required=False, max_length=200, help_text="A short note for this version (optional)."
    )

    class Meta:
        model = Recipe
        fields = ["slug", "project", "enabled", "source"]
        widgets = {"source": SourceEditor}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "project" in self.fields:
            self.fields["project"].required = False  # left out: see clean_project
        if "source" in self.fields:
            # Keep the YAML exactly as typed: leading indentation and the final newline matter.
            self.fields["source"].strip = False
            stored = (self.instance.problems or {}) if self.instance.pk else {}
            self.mark_lines(
                [p.get("line") for p in stored.get("errors", [])],
                [p.get("line") for p in stored.get("warnings", [])],
            )

    def mark_lines(self, errors, warnings) -> None:
        """Tell the editor's gutter which lines to mark (recipe-editor.js reads these)."""
        attrs = self.fields["source"].widget.attrs
        attrs["data-error-lines"] = ",".join(map(str, sorted({n for n in errors if n})))
        attrs["data-warning-lines"] = ",".join(map(str, sorted({n for n in warnings if n})))

    def clean_project(self):
        """The chosen project; left out, the recipe's own, or a new one's default project
        when the form offers it."""
        chosen = self.cleaned_data.get("project")
        if chosen is None and self.instance.pk:
            return self.instance.project
        if chosen is not None:
            return chosen
        default = default_among(self.fields["project"].queryset)
        if default is None:
            raise forms.ValidationError("Choose the recipe's project.")
        return default

    def source_project(self):
        """Whose recipe the source is (its providers, and the shell right it is checked
        with): the project chosen, else the recipe's own (a new one's: the default)."""
        project = self.cleaned_data.get("project")
        if project is None and self.instance.pk:
            project = self.instance.project
        return project or Project.default()

    def clean_source(self):
        # Browsers submit textarea lines with CRLF; versions and diffs compare plain LF text.
        source = self.cleaned_data["source"].replace("\r\n", "\n")
        source_path = self.instance.source_path if self.instance.pk else ""
        project = self.source_project()
        self.validation = result = validate_source(source, source_path, project_id=project.pk)
        if result.ok and source != (self.instance.source if self.instance.pk else None):
            before = (
                validate_source(self.instance.source, source_path, project_id=project.pk)
                if self.instance.pk
                else None
            )
            try:
                editing.check_shell_permission(
                    getattr(self, "user", None),
                    before,
                    result,
                    where=project,
                    old=self.instance.source if self.instance.pk else "",
                    new=source,
                )
            except editing.ShellNotAllowed as exc:
                raise forms.ValidationError(str(exc)) from None
        if not result.ok:
            self.mark_lines([p.line for p in result.errors], [p.line for p in result.warnings])
            # Warnings beside the errors: a typo (`untill:`) is often why an error appears.
            raise forms.ValidationError(
                [str(p) for p in result.errors] + [f"Warning: {p}" for p in result.warnings]
            )
        return source


class ImportForm(forms.Form):
    class MultipleFiles(forms.ClearableFileInput):
        allow_multiple_selected = True

    class MultipleFileField(forms.FileField):
        def clean(self, data, initial=None):
            single = super().clean
            if isinstance(data, list | tuple):
                return [single(item, initial) for item in data]
            return [single(data, initial)]

    files = MultipleFileField(
        widget=MultipleFiles(attrs={"accept": ".yaml,.yml"}), help_text="One or more .yaml files."
    )
    project = forms.ModelChoiceField(
        queryset=None,
        required=False,
        help_text="The project the new recipes belong to (needed when you may choose more "
        "than one).",
    )

    def __init__(self, *args, projects, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["project"].queryset = projects
        self.only_one = only[0] if len(only := list(projects[:2])) == 1 else None
        self.fields["project"].initial = self.only_one

    def clean_project(self):
        chosen = self.cleaned_data.get("project") or self.only_one
        if chosen is None:
            raise forms.ValidationError("Choose the project the recipes belong to.")
        return chosen


@admin.register(Recipe)
class RecipeAdmin(ProjectScopedAdmin):
    form = RecipeForm
    list_display = [
        "slug",
        "name",
        "project",
        "kind",
        "origin",
        "edited_locally",
        "valid",
        "enabled",
    ]
    list_filter = ["kind", "origin", "valid", "enabled", "edited_locally", "project"]
    search_fields = ["slug", "name", "description"]
    actions = ["start_run", "validate", "export_yaml", "duplicate"]
    change_form_template = "admin/recipes/recipe/change_form.html"
    change_list_template = "admin/recipes/recipe/change_list.html"
    info_fields = [
        "last_validation",
        "name",
        "description",
        "kind",
        "origin",
        "source_path",
        "edited_locally",
        "valid",
        "current_version",
        "updated_at",
    ]

    @admin.display(description="Last validation")
    def last_validation(self, obj):
        problems = obj.problems or {}
        rows = [("error", p) for p in problems.get("errors", [])] + [
            ("warning", p) for p in problems.get("warnings", [])
        ]
        if not rows:
            return "valid, no warnings"
        return format_html(
            '<ul class="recipe-problems">{}</ul>',
            format_html_join(
                "",
                '<li class="recipe-{}">{}: {}</li>',
                ((kind, kind, stored_problem(p)) for kind, p in rows),
            ),
        )

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        form.user = request.user  # a class made for this request: the shell check needs it
        return form

    def get_fieldsets(self, request, obj=None):
        editable = ["slug", "project", "enabled", "source", "note"]
        if obj is not None and not self.has_change_permission(request, obj):
            editable = ["slug", "project", "enabled", "source"]
        if obj is None:
            return [(None, {"fields": editable})]
        return [(None, {"fields": editable}), ("About", {"fields": self.info_fields})]

    def get_readonly_fields(self, request, obj=None):
        if obj is None:
            return []
        # The slug ties a synced recipe to its file; renaming would orphan it. Some kinds'
        # sources change in their file only (a Python recipe's code).
        source = ["source"] if obj.source_read_only else []
        return ["slug", *source, *self.info_fields]

    # --- saving ----------------------------------------------------------------------------

    def save_model(self, request, obj, form, change):
        note = form.cleaned_data.get("note") or ("edited in the admin" if change else "created")
        if change:
            result = editing.save_source(obj, obj.source, user=request.user, note=note)
        else:
            recipe, result = editing.create_recipe(
                obj.source,
                slug=obj.slug,
                user=request.user,
                note=note,
                enabled=obj.enabled,
                project=obj.project,
            )
            obj.pk = recipe.pk
            obj.refresh_from_db()
        for warning in result.warnings:
            self.message_user(request, f"Warning: {warning}", messages.WARNING)

    # --- pages -----------------------------------------------------------------------------

    def get_urls(self):
        own = [
            path(
                "<int:recipe_id>/diff/",
                self.admin_site.admin_view(self.diff_view),
                name="recipes_recipe_diff",
            ),
            path(
                "import/",
                self.admin_site.admin_view(self.import_view),
                name="recipes_recipe_import",
            ),
        ]
        return own + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        recipe = self.get_object(request, object_id)
        extra = dict(extra_context or {})
        if recipe is not None:
            extra.update(self.history_context(recipe))
            extra["start_url"] = start_url(recipe.slug)
        return super().change_view(request, object_id, form_url, extra)

    def history_context(self, recipe: Recipe) -> dict:
        versions = list(recipe.versions.select_related("author").order_by("-number"))
        diff_url = reverse("admin:recipes_recipe_diff", args=[recipe.pk])
        rows = []
        for index, version in enumerate(versions):
            older = versions[index + 1] if index + 1 < len(versions) else None
            rows.append(
                {
                    "number": version.number,
                    "author": version.author.get_username() if version.author_id else "sync",
                    "created_at": version.created_at,
                    "note": version.note,
                    "is_current": version.pk == recipe.current_version_id,
                    "diff_url": f"{diff_url}?a={older.number}&b={version.number}" if older else "",
                }
            )
        return {"versions": rows, "diff_url": diff_url}

    def diff_view(self, request, recipe_id):
        recipe = get_object_or_404(self.get_queryset(request), pk=recipe_id)
        if not self.has_view_or_change_permission(request, recipe):
            raise PermissionDenied
        versions = {v.number: v for v in recipe.versions.all()}
        context = {
            **self.admin_site.each_context(request),
            **diff.compare(versions, request.GET.get("a"), request.GET.get("b")),
            "opts": self.model._meta,
            "title": f"Changes in {recipe.slug}",
            "recipe": recipe,
            "change_url": reverse("admin:recipes_recipe_change", args=[recipe.pk]),
        }
        return TemplateResponse(request, "admin/recipes/recipe/diff.html", context)

    def import_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        reports = []
        superuser = request.user.is_superuser
        projects = Project.objects.all() if superuser else self.projects_for(request, "add")
        form = ImportForm(request.POST or None, request.FILES or None, projects=projects)
        if request.method == "POST" and form.is_valid():
            project = form.cleaned_data["project"]
            reports = [
                self.import_one(request, upload, project) for upload in form.cleaned_data["files"]
            ]
            created = sum(1 for r in reports if r["recipe"])
            if created:
                self.message_user(request, f"Imported {created} recipe(s).", messages.SUCCESS)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Import recipes",
            "form": form,
            "reports": reports,
        }
        return TemplateResponse(request, "admin/recipes/recipe/import.html", context)

    def import_one(self, request, upload, project) -> dict:
        report = {"name": upload.name, "recipe": None, "url": "", "errors": [], "warnings": []}
        if upload.size > MAX_IMPORT_BYTES:
            report["errors"] = [f"larger than {MAX_IMPORT_BYTES} bytes"]
            return report
        try:
            source = upload.read().decode("utf-8")
        except UnicodeDecodeError:
            report["errors"] = ["not UTF-8 text"]
            return report
        stem = upload.name.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        try:
            recipe, result = editing.create_recipe(
                source,
                slug=slugify(stem)[:100],
                user=request.user,
                note=f"imported {upload.name}",
                project=project,
            )
        except editing.SourceInvalid as exc:
            report["errors"] = [str(p) for p in exc.result.errors]
            report["warnings"] = [str(p) for p in exc.result.warnings]
            return report
        except (editing.SlugTaken, editing.SlugInvalid, editing.ShellNotAllowed) as exc:
            report["errors"] = [str(exc)]
            return report
        report.update(
            recipe=recipe,
            url=reverse("admin:recipes_recipe_change", args=[recipe.pk]),
            warnings=[str(p) for p in result.warnings],
        )
        return report

    # --- actions ---------------------------------------------------------------------------

    @admin.action(description="Start a run", permissions=["view"])
    def start_run(self, request, queryset):
        if queryset.count() != 1:
            self.message_user(request, "Select exactly one recipe to start.", messages.ERROR)
            return None
        return HttpResponseRedirect(start_url(queryset.get().slug))

    @admin.action(description="Validate", permissions=["view"])
    def validate(self, request, queryset):
        for recipe in queryset:
            result = validate_source(
                recipe.source, recipe.source_path, project_id=recipe.project_id
            )
            if self.has_change_permission(request, recipe):
                recipe.valid = result.ok
                recipe.problems = {
                    "errors": [p.as_dict() for p in result.errors],
                    "warnings": [p.as_dict() for p in result.warnings],
                }
                recipe.save(update_fields=["valid", "problems", "updated_at"])
            for problem in result.errors:
                self.message_user(request, f"Recipe {recipe.slug}: {problem}", messages.ERROR)
            for problem in result.warnings:
                self.message_user(
                    request, f"Recipe {recipe.slug}: warning: {problem}", messages.WARNING
                )
            if result.ok:
                noted = f" ({len(result.warnings)} warning(s))" if result.warnings else ""
                self.message_user(request, f"Recipe {recipe.slug}: valid{noted}", messages.SUCCESS)

    @admin.action(description="Export YAML", permissions=["view"])
    def export_yaml(self, request, queryset):
        recipes = list(queryset)
        if len(recipes) == 1:
            response = HttpResponse(recipes[0].source, content_type="application/yaml")
            response["Content-Disposition"] = f'attachment; filename="{recipes[0].slug}.yaml"'
            return response
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for recipe in recipes:
                archive.writestr(f"{recipe.slug}.yaml", recipe.source)
        response = HttpResponse(buffer.getvalue(), content_type="application/zip")
        response["Content-Disposition"] = 'attachment; filename="recipes.zip"'
        return response

    @admin.action(description="Duplicate", permissions=["add"])
    def duplicate(self, request, queryset):
        # A copy stays in its recipe's project: only where the user may add recipes.
        for recipe in self.rows_for(request, queryset, "add"):
            copy = editing.duplicate(recipe, user=request.user)
            self.message_user(request, f"Created {copy.slug} from {recipe.slug}.", messages.SUCCESS)


@admin.register(RecipeVersion)
class RecipeVersionAdmin(ProjectScopedAdmin):
    project_field = "recipe__project"
    list_display = ["recipe", "number", "author", "note", "created_at"]
    list_filter = ["recipe"]
    readonly_fields = ["recipe", "number", "source", "sha256", "author", "note", "created_at"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
