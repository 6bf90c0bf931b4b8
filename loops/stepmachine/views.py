"""Pages of step-machine runs: the review request (with its Merge button), the Tick button,
and a demo repository made on demand from a recipe's start form. The run page's
step-machine card is this kind's part of the run page (`surfaces.RUN_PARTS`, context from
`part_context`)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from console.permissions import viewer_required
from loops.stepmachine.spec import RECIPE_KIND
from runs import services
from runs.models import Run
from runs.views import act, acting_on, may_operate, run_or_404
from runs.views_start import startable

from . import review as reviews
from . import services as step_machine
from .models import ReviewRequest
from .queries import gate_logs_of, handoffs_of, status_of


def part_context(run: Run) -> dict:
    return {
        "machine": status_of(run),
        "handoffs": handoffs_of(run),
        # A run that ended well (completed: approved, merged, unreviewed): what its last
        # step left in runtime.last_error is history, not a problem to show.
        "last_error_matters": run.status != Run.Status.COMPLETED,
    }


@require_GET
@viewer_required
def run_review(request, run_id):
    run = run_or_404(request.user, run_id)
    review = ReviewRequest.objects.filter(run=run).first()
    if review is None:
        raise Http404("This run has no review request.")
    return render(
        request,
        "planeai/review.html",
        {
            "run": run,
            "review": review,
            "handoffs": handoffs_of(run),
            "gate_logs": gate_logs_of(run),
            "diff_lines": diff_lines(review.diff),
            "may_merge": may_operate(request.user, run) and review.is_open,
        },
    )


@require_POST
@viewer_required
def run_tick(request, run_id):
    """The Tick (or Start) button: the ticks are sent to a worker."""
    run = acting_on(request, run_id)

    def tick():
        started = run.status == Run.Status.PENDING
        step_machine.tick(run, request.actor)
        return "Started." if started else "Tick sent: the runner continues from the current step."

    return act(request, run, tick, "step-machine")


def diff_lines(patch: str) -> list[tuple[str, str]]:
    """(kind, line) for a git patch: add, del, hunk (headers and @@ lines) or same."""
    lines = []
    for line in patch.splitlines():
        if line.startswith(("diff --git", "@@", "+++", "---", "index ", "new file")):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        lines.append((kind, line))
    return lines


@require_POST
@viewer_required
def review_merge(request, run_id):
    acting_on(request, run_id)  # another project's run: 404; one they only view: 403
    try:
        merged = reviews.merge(run_id, request.actor)
    except services.NotAllowed:
        raise PermissionDenied from None
    except services.NotFound:
        raise Http404("No review request.") from None
    except reviews.AlreadyMerged as exc:
        if exc.review.merged_by_id == request.user.pk:  # your own merge, sent twice: done
            messages.success(request, _merged_words(exc.review))
        else:
            messages.warning(request, str(exc))
    except services.ServiceError as exc:
        messages.error(request, str(exc))
    else:
        if merged.status == ReviewRequest.Status.NOTHING_TO_MERGE:
            messages.info(request, f"Nothing to merge: {reviews.nothing_words(merged)}.")
        else:
            messages.success(request, _merged_words(merged))
    return redirect("run_review", run_id)


def _merged_words(review) -> str:
    return f"Merged {review.branch} into {review.target_branch} ({review.merge_commit[:10]})."


@require_POST
@viewer_required
def demo_repository(request, slug):
    from .demo import create_repository
    from .start import demo_root

    recipe = startable(request, slug)
    if recipe.kind != RECIPE_KIND:
        raise Http404("No such step-machine recipe.")
    path = create_repository(demo_root())
    messages.success(
        request,
        f"Made a demo repository at {path}: its branch feature/greeting has a failing test.",
    )
    query = urlencode({"repository": str(path)})
    return redirect(reverse("recipe_start", args=[recipe.slug]) + "?" + query)
