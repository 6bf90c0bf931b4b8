"""The recipe page's card of schedules and webhooks (the recipe page loads this library by
name: the catalogue imports nothing of this app)."""

from django import template

from triggers import schedules
from triggers.models import Schedule, Webhook

register = template.Library()
LATEST = 5  # firings or deliveries shown per schedule or webhook


@register.inclusion_tag("triggers/_recipe_triggers.html", takes_context=True)
def recipe_triggers(context, recipe):
    request = context["request"]
    user = request.user
    rows = []
    for schedule in Schedule.objects.filter(recipe=recipe):
        schedule.next_at = schedules.next_firing(schedule)
        schedule.latest = list(schedule.firings.select_related("run")[:LATEST])
        rows.append(schedule)
    hooks = []
    for webhook in Webhook.objects.filter(recipe=recipe):
        webhook.url = request.build_absolute_uri(webhook.path)
        webhook.latest = list(webhook.deliveries.select_related("run")[:LATEST])
        hooks.append(webhook)
    return {
        "recipe": recipe,
        "schedules": rows,
        "webhooks": hooks,
        "can_edit": user.is_staff and user.has_perm("triggers.change_schedule"),
    }
