from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from console.permissions import operator_required, recipe_reader_required
from recipes import diff
from recipes.forms import StartRunForm, uses_message
from recipes.graph import graph
from recipes.models import Recipe
from recipes.validation import default_provider_configured, repository_default
from runs import services
from runs.executor.spec import SpecError, spec_of

VERSIONS_SHOWN = 20


def current_spec(recipe: Recipe):
    """The current version's spec from the per-version cache runs share (versions never
    change), so a page does not parse the YAML again; None when the recipe is invalid."""
    if not recipe.valid or recipe.current_version is None:
        return None
    try:
        return spec_of(recipe, recipe.current_version)
    except SpecError:
        return None


@require_GET
@recipe_reader_required
def recipe_list(request):
    recipes = list(Recipe.objects.select_related("current_version").order_by("slug"))
    console_default = default_provider_configured()
    for recipe in recipes:
        recipe.default_note = repository_default(recipe, console_default)
    return render(request, "recipes/list.html", {"recipes": recipes})


@require_GET
@recipe_reader_required
def recipe_detail(request, slug):
    recipe = get_object_or_404(Recipe.objects.select_related("current_version"), slug=slug)
    spec = current_spec(recipe)
    return render(
        request,
        "recipes/detail.html",
        {
            "recipe": recipe,
            "lines": recipe.source.splitlines(),
            "errors": recipe.problems.get("errors", []),
            "warnings": recipe.problems.get("warnings", []),
            "graph": graph(spec) if spec is not None else [],
            "spec": spec,
            "versions": recipe.versions.select_related("author").order_by("-number")[
                :VERSIONS_SHOWN
            ],
        },
    )


@require_GET
@recipe_reader_required
def recipe_diff(request, slug):
    recipe = get_object_or_404(Recipe, slug=slug)
    versions = {v.number: v for v in recipe.versions.select_related("author")}
    context = diff.compare(versions, request.GET.get("a"), request.GET.get("b"))
    return render(request, "recipes/diff.html", {"recipe": recipe, **context})


def _step_machine_form_options(request, recipe) -> dict:
    """A step machine's start form: the repositories it may use and the chosen one's
    branches (for branch inputs)."""
    if recipe.kind != Recipe.Kind.PLANEAI:
        return {}
    from recipes.planeai import git
    from recipes.planeai.start import allowed_repositories

    repositories = allowed_repositories()
    chosen = request.POST.get("repository") or request.GET.get("repository")
    if chosen not in repositories:
        chosen = repositories[0] if repositories else ""
    branches = git.branches(chosen) if chosen and git.is_repository(chosen) else []
    return {"repositories": repositories, "repository": chosen, "branches": branches}


@require_http_methods(["GET", "POST"])
@operator_required
def recipe_start(request, slug):
    recipe = get_object_or_404(Recipe.objects.select_related("current_version"), slug=slug)
    spec = current_spec(recipe)
    declared = dict(getattr(spec, "inputs", {}) or {})
    options = _step_machine_form_options(request, recipe)
    # A driven recipe's host is given the message as its task.
    needs_message = recipe.kind == Recipe.Kind.DRIVEN or uses_message(recipe.source)
    form = StartRunForm(
        request.POST or None,
        declared=declared,
        needs_message=needs_message,
        budget=getattr(spec, "budget", None),
        **options,
    )
    if request.method == "POST" and form.is_valid():
        try:
            run = services.start_run(
                recipe,
                actor=request.actor,
                message=form.cleaned_data.get("message", ""),
                inputs=form.raw_inputs(),
                budget=form.raw_budget(),
                budget_replaces_recipe=True,  # the form showed the recipe's limits
                repository=form.repository if options else "",
            )
        except services.InputError as exc:
            form.add_input_errors(exc.errors)
        except services.NotAllowed:
            raise PermissionDenied from None
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(run)
    return render(
        request, "recipes/start.html", {"recipe": recipe, "form": form, "step_machine": options}
    )
