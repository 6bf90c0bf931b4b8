"""Pages for a run's history: fork from an iteration, compare two iterations, the budget
panel. Thin views over runs.services (changes) and runs.compare / runs.chart (reads)."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from console.permissions import viewer_required
from recipes.formats.budget import LIMITS
from recipes.formats.budget import title as budget_title
from runs import budget as run_budget
from runs import compare as comparing
from runs import queries, resuming, services
from runs.decisions import recorded_words
from runs.fork import check_fork_point, continuation_for
from runs.models import Iteration, NodeRun, Run
from runs.views import acting_on, page_context, run_or_404


def budget_context(run: Run) -> dict:
    return {
        "budget_limits": run_budget.limits(run),
        "budget_fields": [(name, budget_title(name), run.budget.get(name, "")) for name in LIMITS],
    }


def fork_links(run: Run, user) -> dict:
    """The run's forks `user` may see (a fork of a run of a recipe moved since is the
    recipe's new project's)."""
    forks = Run.objects.visible_to(user).filter(forked_from=run)
    return {"forks": list(forks.only("pk", "fork_point").order_by("id")[:20])}


def resume_context(run: Run) -> dict:
    """What the Resume confirmation says will run again, and where a fork could continue
    instead (runs.resuming): only for a failed or cancelled run. A paused run: the
    decisions recorded for a resume to carry out (`approve --record-only`)."""
    if run.status == Run.Status.PAUSED:
        recorded = services.recorded_decisions(run)
        return {"recorded_decisions": [recorded_words(gate) for gate in recorded]}
    if run.status not in resuming.STOPPED:
        return {}
    return {
        "resumable": resuming.resumable(run),
        "resume_restarts": resuming.resume_restarts(run),
        "continue_from": resuming.continue_point(run),
    }


# --- fork ----------------------------------------------------------------------------------


def _fork_context(request, run: Run, it: Iteration, **extra) -> dict:
    row = it.node_run
    workflow = run.recipe.kind == "workflow"  # $LOOP_USER_INPUT is the workflow's name for it
    template = (row.state or {}).get("prompt_template", "") if row.kind == NodeRun.Kind.LOOP else ""
    return {
        **page_context(request, run),  # its kind's words for where the feedback goes
        "it": it,
        "is_workflow": workflow,
        # Some kinds are forked with feedback only (a driven loop: loops/driven/forking.py).
        "prompt_editable": bool(getattr(continuation_for(row, run), "edits_prompt", False)),
        "prompt": template,
        "feedback": "",
        **extra,
    }


@require_http_methods(["GET", "POST"])
@viewer_required
def run_fork(request, run_id):
    run = acting_on(request, run_id)
    source = request.POST if request.method == "POST" else request.GET
    try:
        number = int(source.get("iteration") or 0)
    except ValueError:
        number = 0
    it = (
        Iteration.objects.select_related("node_run")
        .filter(run=run, node_id=source.get("node", ""), number=number)
        .order_by("-generation")
        .first()
    )
    if it is None:
        raise Http404("No such iteration.")
    if request.method == "GET":
        try:  # say at once when this iteration cannot be forked
            check_fork_point(run, it.node_id, it.number)
        except services.ServiceError as exc:
            context = _fork_context(request, run, it, refused=str(exc))
            return render(request, "runs/fork.html", context)
        return render(request, "runs/fork.html", _fork_context(request, run, it))
    feedback = request.POST.get("feedback", "")
    prompt = request.POST.get("prompt", "")
    if prompt.strip() == request.POST.get("original_prompt", "").strip():
        prompt = ""  # left as it was: the loop keeps its own prompt
    try:
        fork = services.fork_run(
            run,
            request.actor,
            node=it.node_id,
            iteration=it.number,
            feedback=feedback,
            prompt=prompt,
        )
    except services.NotAllowed:
        raise PermissionDenied from None
    except services.NotFound as exc:
        raise Http404(str(exc)) from None
    except services.ServiceError as exc:
        context = _fork_context(request, run, it, error=_words(exc), feedback=feedback)
        if prompt:
            context["prompt"] = prompt
        return render(request, "runs/fork.html", context, status=exc.status)
    messages.success(
        request,
        f"Started run {fork.pk}: a fork of run {run.pk} after {it.node_id} iteration {it.number}.",
    )
    return redirect(fork)


def _words(exc) -> str:
    errors = getattr(exc, "errors", None)
    if isinstance(errors, dict):
        return " ".join(f"{k}: {v}." for k, v in errors.items())
    return str(exc)


# --- compare -------------------------------------------------------------------------------


@require_GET
@viewer_required
def iteration_compare(request):
    a = _seen_iteration(request.user, request.GET.get("a"))
    b_run = a.run
    if request.GET.get("b_run"):
        b_run = (
            Run.objects.visible_to(request.user)
            .filter(pk=_int(request.GET["b_run"]), recipe_id=a.run.recipe_id)
            .first()
        )
        b_run = b_run or a.run
    b = None
    if request.GET.get("b"):
        b = _seen_iteration(request.user, request.GET["b"])
        if b.run_id != b_run.pk and request.GET.get("b_run"):
            b = None  # the run was changed: pick from its iterations
    if b is None:
        if b_run.pk == a.run_id and (partner := comparing.default_partner(a)):
            # Only one named: the earlier of the pair on the left, and an address that
            # keeps the comparison.
            older, newer = sorted([a, partner], key=lambda it: it.number)
            return redirect(f"{reverse('iteration_compare')}?a={older.pk}&b={newer.pk}")
        b = b_run.iterations.order_by("-id").first()
    view = "unified" if request.GET.get("view") == "unified" else "split"
    context = {
        "a": a,
        "b": b,
        "view": view,
        "runs": _with(_seen(request.user, comparing.sibling_runs(a.run)), b_run),
        "a_choices": _with(comparing.choices(a.run), a),
        "b_choices": _with(comparing.choices(b_run), b),
        "diffs": [],
        **comparing.score_words(a, b),
    }
    status = 200
    if b is not None:
        try:
            context["diffs"] = comparing.compare(a, b)
        except services.ServiceError as exc:
            context["error"], context["b"], status = str(exc), None, exc.status
            # The "To" pickers offer this recipe's runs and their iterations only.
            context["b_choices"] = comparing.choices(b_run)
    return render(request, "runs/compare.html", context, status=status)


def _seen_iteration(user, pk) -> Iteration:
    """An iteration of a run `user` may see; any other answers as one that does not exist."""
    try:
        it = comparing.iteration(pk)
    except services.NotFound:
        raise Http404("No such iteration.") from None
    if not user.has_perm("runs.view_run", it.run):
        raise Http404("No such iteration.")
    return it


def _seen(user, runs: list[Run]) -> list[Run]:
    """The runs of a picker `user` may see (a recipe's runs from before it moved to another
    project are that project's)."""
    seen = queries.seen_runs(user, [run.pk for run in runs])
    return [run for run in runs if run.pk in seen]


def _with(options: list, chosen) -> list:
    """A picker's options always include what is chosen (an old run, an early iteration)."""
    if chosen is not None and all(o.pk != chosen.pk for o in options):
        return [chosen, *options]
    return options


def _int(raw) -> int:
    try:
        return int(raw)
    except (TypeError, ValueError):
        return 0


# --- budget --------------------------------------------------------------------------------


@require_POST
@viewer_required
def run_budget_change(request, run_id):
    run = acting_on(request, run_id)
    limits = {name: request.POST.get(name, "") for name in LIMITS}
    resume = bool(request.POST.get("resume"))
    notice, errors, level = "", [], "success"
    try:
        run = services.set_budget(run, request.actor, limits, resume=resume)
        notice = f"Budget saved; run {run.pk} resumed." if resume else "Budget saved."
    except services.NotAllowed:
        raise PermissionDenied from None
    except services.NotFound as exc:
        raise Http404(str(exc)) from None
    except services.InputError as exc:
        errors = [run_budget.error_words(k, v) for k, v in exc.errors.items()]
        level = "error"
    except services.ServiceError as exc:
        notice, level = str(exc), "error"
    if not request.htmx:
        for text in [notice, *errors]:
            if text:
                messages.add_message(
                    request, messages.SUCCESS if level == "success" else messages.ERROR, text
                )
        return redirect("run_detail", run.pk)
    run = run_or_404(request.user, run.pk)
    context = {
        **page_context(request, run),
        **budget_context(run),
        "budget_errors": errors,
        "notice": notice,
        "notice_level_tag": level,
    }
    if level == "error":  # what was typed comes back in its boxes
        context["budget_fields"] = [(n, budget_title(n), limits[n]) for n in LIMITS]
    return render(request, "runs/_budget.html", context)
