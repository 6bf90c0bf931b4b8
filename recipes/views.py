from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from console.permissions import recipe_reader_required
from recipes import diff
from recipes.graph import graph
from recipes.models import Recipe
from recipes.validation import default_provider_configured, repository_default
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
