"""Slack's interactivity request URL. Slack posts from its servers, with no session and no
CSRF token: the request proves itself by Slack's signature (notifications.slack)."""

from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from . import slack


@csrf_exempt
@require_POST
def slack_interactions(request):
    return slack.handle_interaction(request)
