"""A command agent that prints 30 MB in one iteration, through a real worker: the run keeps
the end within LOOP_MAX_OUTPUT_BYTES, the whole output is downloadable byte for byte, the
API answers are bounded and say `output_truncated`, the live view says "output truncated at"
once, and what flows on to the next iteration is the kept end."""

from __future__ import annotations

import redis
from django.conf import settings
from django.test import Client

from runs import live, services
from runs.actor import ENGINE
from runs.models import Iteration, RunEvent
from runs.output_reads import ANSWER_BYTES
from tests.api.conftest import client_for
from tests.conftest import wait_run

CAP = settings.LOOP_MAX_OUTPUT_BYTES
ANSWER = ANSWER_BYTES  # what one API answer carries of outputs and prompts together
LINES = 300
# 300 numbered lines of 100,001 bytes: 30,000,300 bytes, then the completion signal.
PRINT_30_MB = (
    "for i in $(seq 1 300); do printf '%05d:' \"$i\"; head -c 99994 /dev/zero | tr '\\0' 'A';"
    " echo; done"
)
RECIPE = f"""
name: thirty megabytes
providers:
  big:
    kind: command
    command: |
      if [ "$LOOP_ITERATION" = 1 ]; then
        {PRINT_30_MB}
      else
        printf 'prompt bytes: '; wc -c | tr -d ' '; echo '<promise>COMPLETE</promise>'
      fi
nodes:
  - id: big
    provider: big
    loop: {{prompt: "$LOOP_PREV_OUTPUT", until: COMPLETE, max_iterations: 2}}
"""


def printed() -> bytes:
    return b"".join(b"%05d:" % i + b"A" * 99994 + b"\n" for i in range(1, LINES + 1))


def test_thirty_megabytes_are_kept_within_the_cap_and_downloadable_whole(
    live_worker, make_recipe, viewer
):
    assert CAP < 30_000_000
    run = services.start_run(make_recipe(RECIPE, slug="thirty-mb"), actor=ENGINE, message="go")
    wait_run(run, "completed", "failed", timeout=300)
    assert run.status == "completed", run.error
    first, second = run.iterations.order_by("number")
    node = run.nodes.get(node_id="big")

    # Stored: the end, within the cap; the file holds all of it.
    whole = printed()
    assert first.output_truncated and first.output_bytes == len(whole)
    assert len(first.raw_output.encode()) <= CAP and len(first.output.encode()) <= CAP
    assert whole.endswith(first.raw_output.encode())
    assert len(first.raw_output) > CAP - 100_001  # the end, not some small part of it

    # What flowed on to the next iteration ($LOOP_PREV_OUTPUT) is what the run kept.
    assert f"prompt bytes: {len(first.output.encode())}" in second.output
    assert not second.output_truncated and not node.output_truncated

    api = client_for(viewer)
    # The API: bounded answers that say so, and the whole output byte for byte.
    listed = api.get(f"/api/runs/{run.pk}/iterations")
    assert listed.status_code == 200 and len(listed.content) < ANSWER + 10_000
    # The first output and the second prompt (which quotes it) share the answer's bound.
    item, after = listed.body["items"]
    assert item["output_truncated"] is True and first.output.endswith(item["output"])
    assert len(item["output"]) > ANSWER // 2 - 1000  # half each: the rest is a few bytes
    assert item["output_url"] == f"/api/runs/{run.pk}/iterations/{first.pk}/output"
    assert after["prompt_truncated"] is True and second.prompt.startswith(after["prompt"])
    assert after["output_truncated"] is False and after["output"] == second.output
    alone = api.get(f"/api/runs/{run.pk}/iterations", limit=1)
    assert alone.body["items"][0]["output"] == first.output[-ANSWER:]
    assert alone.body["next_cursor"] and len(alone.content) < ANSWER + 10_000
    download = api.client.get(item["output_url"], headers=api.headers)
    assert download.status_code == 200
    assert download["Content-Type"] == "text/plain; charset=utf-8"
    assert int(download["Content-Length"]) == len(whole)
    assert b"".join(download.streaming_content) == whole

    detail = api.get(f"/api/runs/{run.pk}")
    assert detail.status_code == 200 and len(detail.content) < ANSWER + 10_000
    steps = api.get(f"/api/runs/{run.pk}/steps")
    assert steps.status_code == 200 and len(steps.content) < ANSWER + 10_000

    # The console: the card says it and links the download (the same file).
    page = Client()
    page.force_login(viewer)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert "more than a run keeps (4 MB)" in html and "Download the full output" in html
    assert len(html) < 500_000  # the page shows tails, not the kept 4 MB
    link = f"/runs/{run.pk}/iterations/{first.pk}/output/"
    assert f'href="{link}"' in html
    assert b"".join(page.get(link).streaming_content) == whole

    # The run's log and the live view said it once.
    said = RunEvent.objects.filter(run=run, kind="output_truncated")
    assert [(e.step, e.data["iteration"], e.data["at_bytes"]) for e in said] == [("big", 1, CAP)]
    buffered = _live_buffer(run.pk, f"it-{first.pk}")
    if buffered is not None:  # Redis keeps the live buffer ten minutes
        assert buffered.count("[output truncated at 4 MB") == 1
        assert len(buffered.encode()) < CAP + 1_000


def test_a_step_that_prints_past_the_cap_keeps_its_end_and_its_file(live_worker, make_recipe):
    recipe = make_recipe(
        f"""
name: a long bash step
nodes:
  - id: long
    bash: |
      {PRINT_30_MB}
      echo last line
""",
        slug="long-bash",
    )
    run = services.start_run(recipe, actor=ENGINE, message="go")
    wait_run(run, "completed", "failed", timeout=300)
    assert run.status == "completed", run.error
    node = run.nodes.get(node_id="long")
    assert node.output_truncated and node.output.endswith("AAAA\nlast line")
    assert len(node.output.encode()) <= CAP
    assert node.output_bytes == len(printed()) + len(b"last line")  # the trailing newline goes


def test_an_output_within_the_cap_has_no_file(live_worker, make_recipe):
    recipe = make_recipe("name: small\nnodes:\n  - id: s\n    bash: echo hello\n", slug="small")
    run = services.start_run(recipe, actor=ENGINE, message="go")
    wait_run(run, "completed", "failed")
    node = run.nodes.get(node_id="s")
    assert node.output == "hello" and not node.output_truncated and node.output_bytes is None
    assert not Iteration.objects.filter(run=run).exists()
    assert not RunEvent.objects.filter(run=run, kind="output_truncated").exists()


def _live_buffer(run_id: int, target: str) -> str | None:
    if not settings.LIVE_REDIS_URL:
        return None
    client = redis.Redis.from_url(settings.LIVE_REDIS_URL)
    try:
        data = client.get(live.output_key(run_id, target))
    finally:
        client.close()
    return data.decode("utf-8", "replace") if data is not None else None
