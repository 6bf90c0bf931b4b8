"""The run page's "Download the full output" links: an iteration's or a node's whole output
as a text file, for anyone who may read runs (the API has the same: runs/api_outputs.py)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from console.permissions import viewer_required
from runs.models import Iteration, NodeRun
from runs.output_reads import download, filename


@require_GET
@viewer_required
def iteration_output(request, run_id, iteration_id):
    row = get_object_or_404(
        Iteration.objects.defer("output", "raw_output"), pk=iteration_id, run_id=run_id
    )
    return download(request, row, filename(row))


@require_GET
@viewer_required
def node_output(request, run_id, node_id):
    row = get_object_or_404(NodeRun.objects.defer("output"), pk=node_id, run_id=run_id)
    return download(request, row, filename(row))
