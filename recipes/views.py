from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.views.decorators.http import require_GET

from recipes.models import Recipe


@login_required
@require_GET
def recipe_list(request):
    return render(
        request, "recipes/list.html", {"recipes": Recipe.objects.select_related("current_version")}
    )
