"""The page a signed decision link opens (notifications/links.py). No login: the link is
its named recipient's credential. A GET only shows what the link would do (mail scanners
open links); the page's form POSTs to decide."""

from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from runs.errors import ServiceError

from . import links

TEMPLATE = "notifications/decision_link.html"


@never_cache
@require_http_methods(["GET", "POST"])
def decision_link(request, token: str):
    try:
        link = links.open_link(token)
    except links.LinkRefused as refused:
        return _refused(request, refused.refusal)
    if request.method == "POST":
        return _decide(request, link)
    problem = links.decision_link_problem(link) or links.stale_problem(link)
    if problem:
        return _refused(request, problem, link)
    return _page(request, link)


def _decide(request, link):
    text = request.POST.get("text", "")
    try:
        gate = links.decide(link, text)
    except links.LinkRefused as refused:
        return _refused(request, refused.refusal, link)
    except ServiceError as exc:  # e.g. text missing, or refused by the recipe's rules
        return _page(request, link, error=str(exc), text=text, status=exc.status)
    return _page(request, link, decided=gate)


def _page(request, link, *, decided=None, error="", text="", status=200):
    context = {
        "link": link,
        "gate": link.gate,
        "run": decided.run if decided else link.gate.run,
        "decision": links.decision_of(link),
        "decided": decided,
        "error": error,
        "text": text,
    }
    return render(request, TEMPLATE, context, status=status)


def _refused(request, refusal, link=None):
    context = {"refusal": refusal, "link": link}
    if link is not None:
        context.update(gate=link.gate, run=link.gate.run)
    return render(request, TEMPLATE, context, status=refusal.status)
