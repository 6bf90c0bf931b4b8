"""Loops for people: /loops (filter by run, host agent, status) and /loops/<id>, from which
the whole judge-and-iterate history reads; and the run page's loop panel, refreshed live."""

from django.http import Http404
from django.shortcuts import render
from django.views.decorators.http import require_GET

from console.permissions import viewer_required
from runs.views import run_or_404

from . import queries
from .forms import LoopFilterForm
from .models import Loop


@require_GET
@viewer_required
def loop_list(request):
    form = LoopFilterForm(request.GET or None)
    filters = form.cleaned_data if form.is_valid() else {}
    loops, next_before = queries.loop_page(
        session=filters.get("session"),
        agent=filters.get("agent"),
        status=filters.get("status"),
        before=filters.get("before"),
        user=request.user,
    )
    query = request.GET.copy()
    query.pop("before", None)
    newest_query = query.urlencode()
    if next_before:
        query["before"] = next_before
    return render(
        request,
        "loops/list.html",
        {
            "form": form,
            "loops": loops,
            "next_query": query.urlencode() if next_before else "",
            "newest_query": newest_query if filters.get("before") else None,
        },
    )


@require_GET
@viewer_required
def loop_detail(request, loop_id: int):
    first = _positive_int(request.GET.get("from")) or 1
    size = queries.LOOP_PAGE_ITERATIONS
    try:
        view = queries.loop_detail(loop_id, first=first, count=size)
    except Loop.DoesNotExist:
        raise Http404("No such loop.") from None
    if not request.user.has_perm("runs.view_run", view.loop.run):
        raise Http404("No such loop.")  # of a project the person has nothing in: as none
    pages = {
        "earlier_from": max(1, first - size) if first > 1 else None,
        "later_from": first + size if view.loop.iteration_count >= first + size else None,
    }
    return render(request, "loops/detail.html", {"view": view, **pages})


def _positive_int(raw) -> int | None:
    try:
        value = int(raw or 0)
    except ValueError:
        return None
    return value if value > 0 else None


@require_GET
@viewer_required
def run_loops_part(request, run_id: int):
    run = run_or_404(request.user, run_id)
    return render(request, "loops/_run_loops.html", {"run": run, **queries.run_panel(run)})
