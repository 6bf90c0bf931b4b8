"""System checks of the kernel: every recipe in use is of a kind an installed app registers.

Dropping a kind's app from INSTALLED_APPS must not leave its recipes to run under the
kernel's defaults: the check names each such recipe, and `runs.kinds.get` refuses them at
run time too (UnknownKind)."""

from __future__ import annotations

from django.core.checks import Error
from django.db import DatabaseError
from django.db.models import Q

from runs import kinds


def recipes_of_unknown_kinds(app_configs=None, **_options) -> list[Error]:
    from recipes.models import Recipe

    from .models import Run

    in_use = Q(valid=True) | Q(runs__status__in=Run.ACTIVE)
    try:
        unknown = list(
            Recipe.objects.filter(in_use)
            .exclude(kind__in=[kind.name for kind in kinds.all_kinds()])
            .values_list("slug", "kind")
            .distinct()
        )
    except DatabaseError:
        return []  # no tables yet (before `migrate`): nothing is in use
    return [
        Error(
            f"Recipe '{slug}' is of the loop kind '{kind or '(none)'}', which no installed app "
            "registers.",
            hint="Add the kind's app to INSTALLED_APPS, or disable or delete the recipe.",
            obj=slug,
            id="runs.E001",
        )
        for slug, kind in unknown
    ]
