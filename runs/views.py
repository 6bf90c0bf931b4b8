"""Run pages and the actions on them. Each fragment template serves both the full page
(included) and an htmx refresh (rendered alone); every action also works as a plain POST
that redirects back to the run with a message."""

from functools import partial

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect

from console.permissions import RoleMissing, viewer_required
from runs import kinds, queries, services
from runs.actor import Actor
from runs.forms import ApproveForm, RejectForm, RespondForm, RunFilterForm
from runs.models import Gate, Run


def run_or_404(user, run_id: int) -> Run:
    """The run, if `user` may see it: one of a project they have nothing in answers as an
    id no run has (404, the same words), on every page of runs."""
    try:
        return queries.get_run(run_id, user)
    except Run.DoesNotExist:
        raise Http404("No such run.") from None


def may_operate(user, run: Run) -> bool:
    """Whether `user` operates in `run`'s project: its pages offer its buttons only then."""
    return user.has_perm("runs.operate_run", run)


def acting_on(request, run_id: int) -> Run:
    """The run an action names: 404 for one the person may not see (before any role is
    named), 403 when they see it without operating in its project. Gives the request the
    console actor the services record (and check again)."""
    run = run_or_404(request.user, run_id)
    if not may_operate(request.user, run):
        raise RoleMissing("operator")
    request.actor = Actor("console", request.user)
    return run


def page_context(request, run: Run) -> dict:
    """What every render of a run's page and parts has: the run, whether to offer its
    buttons (its project's role, not any project's), its kind's words."""
    return {"run": run, "can_operate": may_operate(request.user, run), **queries.kind_context(run)}


# --- pages ---------------------------------------------------------------------------------


@require_GET
@viewer_required
def run_list(request):
    """The runs of the projects the person may see: filters offer only those projects and
    their recipes, so a name from another reads as one that does not exist."""
    form = RunFilterForm(
        request.GET or None,
        recipes=queries.recipe_choices(request.user),
        projects=queries.project_choices(request.user),
    )
    if form.is_bound and not form.is_valid():
        # A filter that cannot hold (a status no run has) matches nothing, and says why.
        runs, next_before = [], None
        filters = {}
    else:
        filters = form.cleaned_data if form.is_bound else {}
        runs, next_before = queries.run_list(
            request.user,
            status=filters.get("status", ""),
            recipe=filters.get("recipe", ""),
            project=filters.get("project", ""),
            search=filters.get("q", ""),
            before=filters.get("before"),
        )
    query = request.GET.copy()
    query.pop("before", None)
    newest_query = query.urlencode()
    if next_before:
        query["before"] = next_before
    return render(
        request,
        "runs/list.html",
        {
            "form": form,
            "runs": runs,
            # A team of several projects reads which one each run is of.
            "show_projects": len(form.fields["project"].choices) > 2,
            "next_query": query.urlencode() if next_before else "",
            "newest_query": newest_query if filters.get("before") else None,
        },
    )


@require_GET
@viewer_required
def run_detail(request, run_id):
    run = run_or_404(request.user, run_id)
    nodes_after = _positive_int(request.GET.get("nodes_after"))
    page = queries.run_page(run, request.user, nodes_after=nodes_after)
    _show_scores(page["iterations"])
    page.update(_history(run, request.user, request.GET))
    page["can_operate"] = may_operate(request.user, run)  # run_page brought the kind's words
    page.update(_links(run, request.user))
    kind_parts = []
    for name, part in _kind_parts(run).items():
        if part.context is not None:
            page.update(part.context(run))
        trigger = ", ".join(f"sse:{event}" for event in part.refresh_on.split())
        kind_parts.append({"name": name, "template": part.template, "trigger": trigger})
    page["kind_parts"] = kind_parts
    return render(request, "runs/detail.html", page)


def _history(run, user, query) -> dict:
    """Fork links, the budget panel and the convergence chart (runs.views_history)."""
    return {**_history_part(run, user), **_chart(run, query)}


def _chart(run, query) -> dict:
    from runs import chart

    return {"chart": chart.run_chart(run, metrics=chart.metrics_from(query)), "box": chart.BOX}


def _positive_int(raw) -> int | None:
    try:
        value = int(raw or 0)
    except ValueError:
        return None
    return value if value > 0 else None


# The parts of the run page that refresh on their own when the live stream says so; a
# run's kind adds its own (`LoopKind.run_parts`, see `_parts`). Each context is given the
# person too: what the page links (forks, child runs) is what they may see.
PARTS = {
    "header": ("runs/_header.html", lambda run, user: _header(run, user)),
    "budget": ("runs/_budget.html", lambda run, user: _history_part(run, user)),
    "budget-meters": ("runs/_budget_meters.html", lambda run, user: _history_part(run, user)),
    "chart": ("runs/_chart.html", None),
    "nodes": ("runs/_nodes.html", lambda run, user, **page: queries.nodes(run, user=user, **page)),
    "gate": ("runs/_gate.html", lambda run, user: queries.gate_state(run)),
    "timeline": ("runs/_timeline.html", lambda run, user: _timeline(run)),
    "events": ("runs/_events.html", lambda run, user: _event_log(run)),
}


def _kind_parts(run) -> dict:
    return dict(kinds.of_run(run).run_parts)


def _parts(run, user) -> dict:
    """The kernel's parts (for `user`) and the run's kind's, as (template, context)."""
    own = {name: (part.template, part.context) for name, part in _kind_parts(run).items()}
    kernel = {
        name: (template, context and partial(context, user=user))
        for name, (template, context) in PARTS.items()
    }
    return {**own, **kernel}


def _header(run, user):
    return {
        "recipe_name": queries.recipe_name(run),
        **queries.usage(run),
        **_history_part(run, user),
        **_links(run, user),
    }


def _links(run, user) -> dict:
    """Which of the runs the header names (its parent, the run it re-ran or forked) it
    links: those `user` may see; a run of another project goes unnamed."""
    return {
        "linked_runs": queries.seen_runs(user, [run.parent_id, run.rerun_of_id, run.forked_from_id])
    }


def _history_part(run, user):
    from runs.views_history import budget_context, fork_links, resume_context

    return {**fork_links(run, user), **resume_context(run), **budget_context(run)}


def _event_log(run):
    rows, earlier = queries.events(run)
    return {"events": rows, "earlier_events": earlier}


def _timeline(run, before=None):
    page, older = queries.iterations(run, before=before)
    return {"iterations": _show_scores(page), "older": older}


def _show_scores(iterations):
    from runs.chart import show_scores

    return show_scores(iterations)


@require_GET
@viewer_required
def run_part(request, run_id, part):
    run = run_or_404(request.user, run_id)
    parts = _parts(run, request.user)
    if part not in parts:
        raise Http404("No such part.")
    template, context = parts[part]
    if part == "nodes":
        # The page of nodes the person is looking at stays the one that refreshes.
        values = context(run, after=_positive_int(request.GET.get("after")))
    elif part == "chart":  # the numbers the person chose stay the ones charted
        values = _chart(run, request.GET)
    else:
        values = context(run) if context is not None else {}
    return render(request, template, {**page_context(request, run), **values})


@require_GET
@viewer_required
def gate_detail(request, run_id, gate_id):
    """One gate's own page, where notifications link: its panel if it still waits (the
    decision is a POST from there), else who decided it."""
    run = run_or_404(request.user, run_id)
    gate = run.gates.select_related("iteration", "decided_by").filter(pk=gate_id).first()
    if gate is None:
        raise Http404("No such gate.")
    state = queries.gate_state(run)
    if gate.is_pending:
        waiting = [g for g in [state["gate"], *state["other_gates"]] if g and g.pk != gate.pk]
        previous = state["last_decision"]
        state["gate"], state["other_gates"] = gate, waiting
        if previous is not None and previous.node_run_id != gate.node_run_id:
            state["last_decision"] = None
    else:
        state["gate"], state["last_decision"], state["other_gates"] = None, gate, []
    state["now_waiting"] = None if gate.is_pending else services.pending_gate(run)
    # The kind's words too: where the run stands is said as its header says it.
    context = {**page_context(request, run), "this_gate": gate, **state}
    return render(request, "runs/gate.html", context)


@require_GET
@viewer_required
@vary_on_headers("HX-Request")
def run_iterations(request, run_id):
    """Older iterations on demand: the cards alone for htmx, a page of them otherwise."""
    run = run_or_404(request.user, run_id)
    try:
        before = int(request.GET.get("before") or 0) or None
    except ValueError:
        before = None
    context = {**page_context(request, run), **_timeline(run, before)}
    template = "runs/_iterations.html" if request.htmx else "runs/iterations.html"
    return render(request, template, context)


@require_GET
@viewer_required
def run_events(request, run_id):
    run = run_or_404(request.user, run_id)
    try:
        before = int(request.GET.get("before") or 0) or None
    except ValueError:
        before = None
    rows, earlier = queries.events(run, before=before)
    return render(
        request, "runs/events.html", {"run": run, "events": rows, "earlier_events": earlier}
    )


# --- actions -------------------------------------------------------------------------------


def act(request, run, action, part, draft=None, draft_reason=None):
    """Call a service; answer htmx with the refreshed part (the kernel's or the run's
    kind's), a plain POST with a redirect. A kind's own actions answer through it too."""
    notice, level = "", messages.SUCCESS
    try:
        result = action()
    except services.StarterCannotApprove as exc:  # a rule of the recipe, said on the page
        result, notice, level = None, str(exc), messages.ERROR
    except services.NotAllowed:
        raise PermissionDenied from None
    except services.AlreadyDecided as exc:
        result, notice, level = None, str(exc), messages.WARNING
    except services.NotFound as exc:  # worded as for what does not exist, whatever it is
        raise Http404(str(exc)) from None
    except services.ServiceError as exc:
        result, notice, level = None, str(exc), messages.ERROR
    if isinstance(result, str):
        notice = result
    if request.htmx:
        run = run_or_404(request.user, run.pk)
        template, context = _parts(run, request.user)[part]
        response = render(
            request,
            template,
            {
                **page_context(request, run),
                **(context(run) if context is not None else {}),
                "notice": notice,
                "notice_level": level,
                # refused input comes back in its box, so nothing typed is lost
                "draft": draft if level == messages.ERROR else None,
                "draft_reason": draft_reason if level == messages.ERROR else None,
            },
        )
        if part == "header":
            # The header is refreshed live too: its notice goes beside it, out of band.
            response.content += render_to_string(
                "runs/_run_notice.html",
                {"notice": notice, "notice_level": level, "oob": True},
                request=request,
            ).encode()
        return response
    if notice:
        messages.add_message(request, level, notice)
    if request.POST.get("next") == "inbox":  # the inbox's `a` key: back where it was pressed
        return redirect("inbox")
    return redirect("run_detail", run.pk)


@require_POST
@viewer_required
def run_cancel(request, run_id):
    run = acting_on(request, run_id)

    def cancel():
        services.cancel_run(run, request.actor)
        return f"Run {run.pk} cancelled."

    return act(request, run, cancel, "header")


@require_POST
@viewer_required
def run_resume(request, run_id):
    run = acting_on(request, run_id)

    def resume():
        services.resume_run(run, request.actor)
        return f"Run {run.pk} resumed."

    return act(request, run, resume, "header")


@require_POST
@viewer_required
def run_rerun(request, run_id):
    run = acting_on(request, run_id)
    on_current = request.POST.get("version") == "current"
    try:
        new_run = services.rerun(run, actor=request.actor, on_current_version=on_current)
    except services.NotAllowed:
        raise PermissionDenied from None
    except services.NotFound as exc:
        raise Http404(str(exc)) from None
    except services.ServiceError as exc:
        messages.error(request, str(exc))
        return redirect("run_detail", run.pk)
    messages.success(
        request,
        f"Started run {new_run.pk}, a re-run of run {run.pk} "
        f"on recipe version {new_run.recipe_version.number}.",
    )
    if request.htmx:
        return HttpResponseClientRedirect(new_run.get_absolute_url())
    return redirect(new_run)


def _form_errors(form) -> str:
    return " ".join(str(e) for errors in form.errors.values() for e in errors)


@require_POST
@viewer_required
def gate_approve(request, run_id, gate_id):
    run = acting_on(request, run_id)
    form = ApproveForm(request.POST)

    def approve():
        if not form.is_valid():  # nothing is decided on input we could not read whole
            raise services.ServiceError(_form_errors(form) + " The gate is still waiting.")
        gate = services.gate_for_decision(run, gate_id)
        decided = services.approve(
            gate.pk,
            request.actor,
            comment=form.cleaned_data["comment"],
            decision=form.cleaned_data["decision"],
            digest=form.cleaned_data["digest"],
        )
        return _decision_notice(decided)

    return act(request, run, approve, "gate", draft=request.POST.get("comment", ""))


@require_POST
@viewer_required
def gate_respond(request, run_id, gate_id):
    """One of the gate's offered decisions, by id (a gate that declares its own)."""
    run = acting_on(request, run_id)
    form = RespondForm(request.POST)

    def respond():
        if not form.is_valid():
            raise services.ServiceError(_form_errors(form) + " The gate is still waiting.")
        gate = services.gate_for_decision(run, gate_id)
        data = form.cleaned_data
        decided = services.respond(
            gate.pk, request.actor, data["decision"], text=data["text"], digest=data["digest"]
        )
        return _decision_notice(decided)

    return act(request, run, respond, "gate", draft=request.POST.get("text", ""))


@require_POST
@viewer_required
def gate_reject(request, run_id, gate_id):
    run = acting_on(request, run_id)
    form = RejectForm(request.POST)

    def reject():
        if not form.is_valid():
            raise services.ServiceError(_form_errors(form) + " The gate is still waiting.")
        gate = services.gate_for_decision(run, gate_id)
        services.reject(
            gate.pk,
            request.actor,
            reason=form.cleaned_data["reason"],
            digest=form.cleaned_data["digest"],
        )
        return f"Rejected at {gate.node_id}."  # the reason: once, in the run's header

    return act(request, run, reject, "gate", draft_reason=request.POST.get("reason", ""))


def _decision_notice(gate: Gate) -> str:
    if gate.is_pending:  # a quorum still short
        return (
            f"Your approval is counted: {gate.approvals_given()} of {gate.approvals_needed}. "
            "The gate waits for the others."
        )
    if gate.decisions and gate.kind == Gate.Kind.LOOP:
        return f"Decided “{gate.decision_label}” at {gate.node_id}."
    if gate.kind == Gate.Kind.LOOP and gate.iteration_id is None:  # a step machine's human.wait
        if gate.status == Gate.Status.ACCEPTED:
            return f"Accepted at {gate.node_id}: the run goes on."
        return f"Going on from {gate.node_id} with your feedback."
    if gate.kind == Gate.Kind.LOOP:
        if gate.status == Gate.Status.ACCEPTED:
            return f"Accepted: {gate.node_id} completes with iteration {gate.iteration_number}."
        return f"Continuing {gate.node_id} with another iteration."
    if gate.decision:
        return f"Decided '{gate.decision}' at {gate.node_id}."
    return f"Approved {gate.node_id}."
