"""The run page's "Download the full output" links: an iteration's or a node's whole output
as a text file, for anyone who may read the run (the API has the same: runs/api_outputs.py);
of a run of another project, none, as for an id that does not exist."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from console.permissions import viewer_required
from console.projects import visible
from runs.models import Iteration, NodeRun
from runs.output_reads import download, filename

# Who may read a row's output: who may see its run, in the run's project.
SEEN = ("runs.view_run", "run__project")


@require_GET
@viewer_required
def iteration_output(request, run_id, iteration_id):
    rows = visible(Iteration.objects.defer("output", "raw_output"), request.user, *SEEN)
    row = get_object_or_404(rows, pk=iteration_id, run_id=run_id)
    return download(request, row, filename(row))


@require_GET
@viewer_required
def node_output(request, run_id, node_id):
    rows = visible(NodeRun.objects.defer("output"), request.user, *SEEN)
    row = get_object_or_404(rows, pk=node_id, run_id=run_id)
    return download(request, row, filename(row))
