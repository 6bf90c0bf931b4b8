"""The recipe page's card of schedules and webhooks (the recipe page loads this library by
name: the catalogue imports nothing of this app)."""

from django import template
from django.db.models import Prefetch

from triggers import schedules
from triggers.models import Schedule, ScheduleFiring, Webhook, WebhookDelivery

register = template.Library()
LATEST = 5  # firings or deliveries shown per schedule or webhook


@register.inclusion_tag("triggers/_recipe_triggers.html", takes_context=True)
def recipe_triggers(context, recipe):
    request = context["request"]
    user = request.user
    # The latest firings and deliveries of all of them in one query each (a sliced prefetch).
    firings = ScheduleFiring.objects.select_related("run")[:LATEST]
    rows = list(
        Schedule.objects.filter(recipe=recipe).prefetch_related(
            Prefetch("firings", queryset=firings, to_attr="latest")
        )
    )
    for schedule in rows:
        schedule.next_at = schedules.next_firing(schedule)
    deliveries = WebhookDelivery.objects.select_related("run")[:LATEST]
    hooks = list(
        Webhook.objects.filter(recipe=recipe).prefetch_related(
            Prefetch("deliveries", queryset=deliveries, to_attr="latest")
        )
    )
    for webhook in hooks:
        webhook.url = request.build_absolute_uri(webhook.path)
    return {
        "recipe": recipe,
        "schedules": rows,
        "webhooks": hooks,
        # In the recipe's project (console.projects), not in any of the user's projects.
        "can_edit": user.is_staff and user.has_perm("triggers.change_schedule", recipe),
    }
