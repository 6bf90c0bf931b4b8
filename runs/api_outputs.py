"""A whole output over HTTP: an iteration's (everything its agent printed) or a step's, as a
text file, streamed; for anyone who may read the run. The JSON answers carry only its end
(runs/output_reads.py)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Path as PathParam
from ninja import Router

from console.api_errors import errors
from runs.api import MAX_ID, RunId, readable_run
from runs.models import Iteration, NodeRun
from runs.output_reads import download, filename

router = Router()

TEXT_FILE = {
    "responses": {
        200: {
            "description": "The whole output, UTF-8 text",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    }
}


@router.get(
    "/{run_id}/iterations/{iteration_id}/output",
    response=errors(403, 404, 422),
    url_name="iteration_output",
    summary="An iteration's whole output (what its agent printed) as a text file",
    openapi_extra=TEXT_FILE,
)
def iteration_output(
    request,
    run_id: int = RunId,
    iteration_id: int = PathParam(..., ge=1, le=MAX_ID, description="The iteration's id"),
):
    run = readable_run(request, run_id)
    row = get_object_or_404(
        Iteration.objects.defer("output", "raw_output"), pk=iteration_id, run=run
    )
    return download(request, row, filename(row))


@router.get(
    "/{run_id}/steps/{step_id}/output",
    response=errors(403, 404, 422),
    url_name="step_output",
    summary="A step's whole output (any node of the run, by its id in /steps) as a text file",
    openapi_extra=TEXT_FILE,
)
def step_output(
    request,
    run_id: int = RunId,
    step_id: int = PathParam(..., ge=1, le=MAX_ID, description="The step's id (/steps)"),
):
    run = readable_run(request, run_id)
    row = get_object_or_404(NodeRun.objects.defer("output"), pk=step_id, run=run)
    return download(request, row, filename(row))
