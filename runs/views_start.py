"""Starting a run from a recipe: the start form (its inputs, budget and the options the
recipe's kind adds). The catalogue shows recipes; starting one is the kernel's."""

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from console.permissions import RoleMissing, viewer_required
from recipes.views import current_spec, recipe_or_404
from runs import services
from runs.actor import Actor
from runs.start_form import StartRunForm


def _start_options(request, recipe) -> dict:
    """What the recipe's kind adds to the start form (LoopKind.start_options)."""
    chosen = request.POST.get("repository") or request.GET.get("repository") or ""
    return recipe.loop_kind.start_options(chosen)


def startable(request, slug: str):
    """The recipe a person starts: 404 when they may not see it (before any role is named),
    403 when they see it without operating in its project. Gives the request its actor."""
    recipe = recipe_or_404(request.user, slug)
    if not request.user.has_perm("runs.operate_run", recipe):
        raise RoleMissing("operator")
    request.actor = Actor("console", request.user)
    return recipe


@require_http_methods(["GET", "POST"])
@viewer_required
def recipe_start(request, slug):
    recipe = startable(request, slug)
    refusal = services.start_refusal(recipe)
    if refusal:  # a disabled or invalid recipe: why, and no form to fill in for nothing
        return render(request, "recipes/start.html", _refused(recipe, refusal))
    spec = current_spec(recipe)
    declared = dict(getattr(spec, "inputs", {}) or {})
    options = _start_options(request, recipe)
    form = StartRunForm(
        request.POST or None,
        declared=declared,
        needs_message=services.needs_message(recipe),
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
        except services.NotFound as exc:
            raise Http404(str(exc)) from None
        except services.ServiceError as exc:
            form.add_error(None, str(exc))
        else:
            return redirect(run)
    return render(
        request, "recipes/start.html", {"recipe": recipe, "form": form, "step_machine": options}
    )


def _refused(recipe, refusal: str) -> dict:
    problems = recipe.problems if not recipe.valid else {}
    return {
        "recipe": recipe,
        "refusal": refusal,
        "errors": problems.get("errors", []),
        "warnings": problems.get("warnings", []),
    }
