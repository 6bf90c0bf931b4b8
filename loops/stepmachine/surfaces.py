"""What the step machine shows on the kernel's surfaces (its `LoopKind`, loops/stepmachine/kind.py):
its pages, its API router, its card on the run page, its `manage.py loop` subcommands and
the sentences of its events. Read once, from the app's ready()."""

from __future__ import annotations

from django.db.models import Q
from django.urls import reverse

from runs.kinds import RunPart

from . import api, events, loop_commands, urls
from .machine import STOPPING_STATUSES
from .views import part_context

URLS = urls.urlpatterns
API_ROUTER = api.router
LOOP_COMMANDS = loop_commands.COMMANDS
API_PREFIX = "/runs"  # /api/runs/{id}/handoffs, /machine, /tick

# The run page's step-machine card (its root is <section id="step-machine">).
RUN_PARTS = {"step-machine": RunPart("planeai/_run_part.html", part_context)}

# Words every page of a step-machine run uses: an iteration is a role's turn, a new
# generation a new session; a fork's feedback goes with the step's prompt.
WORDS = {
    "iteration_word": "turn",
    "attempt_words": "of session",
    "says_status_meaning": True,
    "fork_feedback_goes": "Sent with the step's prompt again, under “Feedback from a person”",
}


def run_context(run) -> dict:
    return WORDS


event_sentence = events.describe


# The inbox: a role's session is a loop of the run (its turns are the iterations); a run
# its machine stopped (blocked, needs_human) and an approved run whose review request waits
# to be merged wait for a person.
LOOP_ROWS = Q(kind="session")
NEEDS_A_PERSON = Q(status="paused", phase__in=sorted(STOPPING_STATUSES)) | Q(review__status="open")


def person_action(run):
    from .models import ReviewRequest

    if ReviewRequest.objects.filter(run=run, status=ReviewRequest.Status.OPEN).exists():
        return "Review and merge", reverse("run_review", args=[run.pk])
    return None
