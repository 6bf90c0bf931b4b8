from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from runs.models import Run


@login_required
@require_GET
def run_list(request):
    return render(request, "runs/list.html", {"runs": Run.objects.select_related("recipe")[:50]})


@login_required
@require_GET
def run_detail(request, run_id):
    run = get_object_or_404(Run.objects.select_related("recipe", "recipe_version"), pk=run_id)
    return render(request, "runs/detail.html", {"run": run})
