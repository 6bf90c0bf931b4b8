import functools

from django.http import Http404
from django.shortcuts import render
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


def recipe_or_404(user, slug: str) -> Recipe:
    """The recipe, if `user` may see it: one of a project they have nothing in answers as a
    slug no recipe has (404, the same words)."""
    found = (
        Recipe.objects.visible_to(user)
        .select_related("current_version", "project")
        .filter(slug=slug)
        .first()
    )
    if found is None:
        raise Http404("No such recipe.")
    return found


@require_GET
@recipe_reader_required
def recipe_list(request):
    recipes = list(
        Recipe.objects.visible_to(request.user)
        .select_related("current_version", "project")
        .order_by("slug")
    )
    console_default = functools.cache(default_provider_configured)  # each project's own
    for recipe in recipes:
        recipe.default_note = repository_default(recipe, console_default)
        # Its Start button: where the person operates (the role of its project).
        recipe.may_start = request.user.has_perm("runs.operate_run", recipe)
    context = {
        "recipes": recipes,
        "can_operate": any(recipe.may_start for recipe in recipes),
        # A team of several projects reads which one each recipe is of.
        "show_projects": len({recipe.project_id for recipe in recipes}) > 1,
    }
    return render(request, "recipes/list.html", context)


@require_GET
@recipe_reader_required
def recipe_detail(request, slug):
    recipe = recipe_or_404(request.user, slug)
    spec = current_spec(recipe)
    return render(
        request,
        "recipes/detail.html",
        {
            "recipe": recipe,
            "can_operate": request.user.has_perm("runs.operate_run", recipe),
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
    recipe = recipe_or_404(request.user, slug)
    versions = {v.number: v for v in recipe.versions.select_related("author")}
    context = diff.compare(versions, request.GET.get("a"), request.GET.get("b"))
    return render(request, "recipes/diff.html", {"recipe": recipe, **context})
