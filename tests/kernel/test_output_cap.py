"""The output cap's pieces: what a capture keeps and writes, a step's retry, a final answer
that differs from what streamed, the API's shared bound, the download of an output stored
without a file, and the limits on what flows on (structured answers, environment values).
The whole path with 30 MB through a real worker is tests/engine_worker/test_output_cap.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client

from runs import output_reads, services, tasks
from runs.actor import ENGINE
from runs.engine.variables import ENV_VALUE_LIMIT, VarContext, VariableError, substitute_shell
from runs.executor.agent import StepFailed, call_agent
from runs.models import Iteration, NodeRun, RunEvent
from runs.output_reads import level
from runs.outputs import Capture, folder, path_of, tail
from runs.providers.base import AgentRequest, AgentResult
from tests.api.conftest import client_for

pytestmark = pytest.mark.django_db


# --- the capture ---------------------------------------------------------------------------


def test_a_capture_keeps_the_end_in_memory_and_everything_in_its_file(settings):
    capture = Capture(run_id=990001, name="iteration-1-1", limit=1000)
    chunks = [f"{n:04d}" + "x" * 96 for n in range(30)]  # 3,000 bytes in 100-byte chunks
    for chunk in chunks[:10]:
        capture.add(chunk)
    assert capture.text == "".join(chunks[:10]) and not capture.truncated
    assert capture.fields() == {"output_file": "", "output_bytes": None}
    for chunk in chunks[10:]:
        capture.add(chunk)
    assert capture.text == "".join(chunks)[-1000:]
    assert capture.truncated and capture.path.read_text() == "".join(chunks)
    assert capture.fields() == {
        "output_file": "runs/990001/outputs/iteration-1-1.txt",
        "output_bytes": 3000,
    }
    # The final answer is what streamed: the file stays as it was written.
    written = capture.path.stat().st_mtime_ns
    assert capture.keep("".join(chunks)) == "".join(chunks)[-1000:]
    assert capture.path.stat().st_mtime_ns == written


def test_one_huge_chunk_is_cut_to_the_end_without_splitting_a_character():
    capture = Capture(run_id=990002, name="node-1-1", limit=1001)
    capture.add("é" * 5000)  # 10,000 bytes at once
    assert capture.text == "é" * 500  # 1,000 bytes: half a character is not kept
    assert capture.path.read_bytes() == ("é" * 5000).encode()
    assert tail("abcé", 2) == "é" and tail("abcé", 3) == "cé" and tail("abc", 10) == "abc"


def test_a_final_answer_that_differs_from_what_streamed_replaces_the_file():
    capture = Capture(run_id=990003, name="iteration-2-1", limit=100)
    capture.add("streamed " * 50)
    final = "answer " * 40  # 280 bytes: past the cap, not what streamed
    assert capture.keep(final) == final[-100:]
    assert capture.path.read_text() == final and capture.fields()["output_bytes"] == 280
    short = Capture(run_id=990003, name="iteration-3-1", limit=100)
    short.add("tool call line\n" * 20)
    assert short.keep("done") == "done"  # within the cap: kept whole, no file
    assert not short.truncated and not (folder(990003) / "iteration-3-1.txt").exists()


def test_a_reset_drops_the_earlier_attempts_text_and_file():
    capture = Capture(run_id=990004, name="node-9-1", limit=10)
    capture.add("first attempt, far too long")
    path = capture.path
    capture.reset()
    assert not path.exists() and capture.text == "" and not capture.truncated
    capture.add("second")
    assert capture.text == "second" and capture.fields()["output_file"] == ""


def test_only_output_files_inside_the_data_folder_are_served(settings):
    capture = Capture(run_id=990005, name="node-1-1", limit=4)
    capture.add("12345678")
    assert path_of(capture.fields()["output_file"]) == capture.path.resolve()
    for outside in ("../../etc/passwd", "/etc/passwd", "runs/990005/work/x.txt", ""):
        assert path_of(outside) is None, outside


def test_the_file_stops_at_the_spill_cap_keeping_the_start_and_saying_so(settings):
    """LOOP_OUTPUT_SPILL_MB: a looping agent cannot fill the disk. The file keeps the
    output's start (nothing else does), the run its end, and the size is the whole's."""
    settings.LOOP_OUTPUT_SPILL_MB = 1
    capture = Capture(run_id=990006, name="iteration-1-1", limit=1000)
    assert capture.spill == 1 << 20
    chunks = [f"{n:06d}" + "é" * 2045 + "\n" for n in range(1500)]  # 4,097 bytes each
    for chunk in chunks:
        capture.add(chunk)
    whole = "".join(chunks)
    written = capture.path.read_bytes()
    note = (
        b"\n[output cut at 1 MB (LOOP_OUTPUT_SPILL_MB): this file keeps its start, "
        b"the run its end]\n"
    )
    assert written.endswith(note) and len(written) <= (1 << 20) + len(note)
    kept = written[: -len(note)].decode()  # whole characters: the cut split none
    assert whole.startswith(kept) and len(kept.encode()) > (1 << 20) - 4
    assert capture.text == tail(whole, 1000)
    assert capture.fields()["output_bytes"] == len(whole.encode())
    # A final answer that is not what streamed is written anew, within the cap too.
    final = "z" * (3 << 20)
    assert capture.keep(final) == "z" * 1000
    assert capture.path.read_bytes() == b"z" * (1 << 20) + note
    assert capture.fields()["output_bytes"] == 3 << 20


def test_no_spill_cap_keeps_the_whole_output():
    capture = Capture(run_id=990007, name="node-2-1", limit=10, spill=0)
    capture.add("a" * 5000)
    assert capture.path.read_text() == "a" * 5000


# --- a step through the kernel, with a small cap ---------------------------------------------

RETRY = """
name: retried
nodes:
  - id: noisy
    retry: {max_attempts: 2, delay_ms: 0}
    bash: |
      if [ ! -e "$ARTIFACTS_DIR/tried" ]; then
        mkdir -p "$ARTIFACTS_DIR" && touch "$ARTIFACTS_DIR/tried"
        head -c 10000 /dev/zero | tr '\\0' x
        exit 1
      fi
      echo short
"""
LONG = """
name: long
nodes:
  - id: long
    bash: head -c 10000 /dev/zero | tr '\\0' y; echo; echo end
"""


def run_steps(run, broker):
    tasks.advance_run(run.pk)
    broker.deliver()
    run.refresh_from_db()
    return run


def test_a_long_bash_step_keeps_its_end_and_says_so_once(
    transactional_db, make_recipe, broker, settings, viewer
):
    settings.LOOP_MAX_OUTPUT_BYTES = 2048
    run = run_steps(
        services.start_run(make_recipe(LONG, "long"), actor=ENGINE, message="m"), broker
    )
    assert run.status == "completed", run.error
    node = NodeRun.objects.get(run=run, node_id="long")
    assert node.output == ("y" * 10000 + "\nend")[-2048:]
    assert node.output_bytes == 10004 and node.output_truncated
    whole = Path(django_settings.LOOP_DATA_DIR, node.output_file).read_text()
    assert whole == "y" * 10000 + "\nend"
    said = RunEvent.objects.filter(run=run, kind="output_truncated")
    assert [(e.step, e.data["at_bytes"]) for e in said] == [("long", 2048)]
    page = Client()
    page.force_login(viewer)
    html = page.get(f"/runs/{run.pk}/").content.decode()
    assert "The output of long passed 2 KB: the run keeps its last 2 KB" in html
    assert "The output was 9.8 KB, more than a run keeps (2 KB)" in html
    assert f'href="/runs/{run.pk}/nodes/{node.pk}/output/"' in html


def test_a_retry_starts_its_output_afresh(transactional_db, make_recipe, broker, settings):
    settings.LOOP_MAX_OUTPUT_BYTES = 2048
    run = run_steps(
        services.start_run(make_recipe(RETRY, "retried"), actor=ENGINE, message="m"), broker
    )
    assert run.status == "completed", run.error
    node = NodeRun.objects.get(run=run, node_id="noisy")
    assert node.output == "short" and not node.output_truncated
    assert not list(folder(run.pk).glob("*.txt"))  # the failed attempt's file went with it


# --- the API's bound and the download without a file ------------------------------------------


def test_the_level_keeps_short_texts_whole_and_cuts_the_long_ones_alike():
    assert level([10, 5000, 5000, 20], 1000) == 485
    assert level([100, 200], 1000) == 200
    assert level([3000, 0, 3000, 0, 3000, 0, 5, 0], 4096) == 1363
    assert level([], 1000) == 0


@pytest.fixture
def stored_run(make_recipe, operator):
    """A run whose rows hold outputs as an older console stored them: long, and no file."""
    recipe = make_recipe("name: t\nnodes:\n  - id: a\n    bash: echo\n", slug="stored")
    run = services.start_run(recipe, actor=ENGINE, message="m")
    node = NodeRun.objects.create(run=run, node_id="a", kind="loop", output="n" * 3000)
    for number, text in enumerate(["a" * 3000, "b" * 3000, "c" * 3000, "short"], start=1):
        Iteration.objects.create(
            run=run, node_run=node, node_id="a", number=number, output=text, raw_output=text
        )
    return run


def test_an_answer_shares_its_bound_and_says_what_it_cut(stored_run, viewer, settings):
    settings.LOOP_MAX_OUTPUT_BYTES = 4096
    api = client_for(viewer)
    items = api.get(f"/api/runs/{stored_run.pk}/iterations").body["items"]
    assert [len(i["output"]) for i in items] == [1363, 1363, 1363, 5]
    assert [i["output_truncated"] for i in items] == [True, True, True, False]
    assert items[0]["output"] == "a" * 1363  # the end of the output
    assert items[3]["output"] == "short"
    one = api.get(f"/api/runs/{stored_run.pk}/iterations", limit=1).body["items"][0]
    assert one["output"] == "a" * 3000 and one["output_truncated"] is False
    node = api.get(f"/api/runs/{stored_run.pk}").body["nodes"][0]
    assert node["output"] == "n" * 3000 and node["output_truncated"] is False


def test_an_output_without_a_file_downloads_from_the_database(stored_run, viewer, monkeypatch):
    monkeypatch.setattr(output_reads, "DOWNLOAD_SLICE", 700)
    api = client_for(viewer)
    first = stored_run.iterations.get(number=1)
    got = api.client.get(
        f"/api/runs/{stored_run.pk}/iterations/{first.pk}/output", headers=api.headers
    )
    assert got.status_code == 200 and b"".join(got.streaming_content) == b"a" * 3000
    assert 'filename="run-' in got["Content-Disposition"]
    node = stored_run.nodes.get(node_id="a")
    node.output_file = "../../../etc/passwd"  # never written by a worker; never served
    node.save(update_fields=["output_file"])
    got = api.client.get(f"/api/runs/{stored_run.pk}/steps/{node.pk}/output", headers=api.headers)
    assert b"".join(got.streaming_content) == b"n" * 3000
    other = api.client.get(
        f"/api/runs/{stored_run.pk + 1}/steps/{node.pk}/output", headers=api.headers
    )
    assert other.status_code == 404


# --- what flows on ------------------------------------------------------------------------------


def test_a_value_too_long_for_the_environment_is_refused_with_its_line():
    ctx = VarContext(user_message="m" * (ENV_VALUE_LIMIT + 1))
    with pytest.raises(VariableError) as caught:
        substitute_shell("echo start\nprintf '%s' \"$USER_MESSAGE\" | wc -c\n", ctx)
    message = str(caught.value)
    assert message.startswith(f"line 2: $USER_MESSAGE is {ENV_VALUE_LIMIT + 1:,} bytes")
    assert "write it to a file (in $ARTIFACTS_DIR)" in message
    fits = VarContext(user_message="m" * ENV_VALUE_LIMIT)
    assert substitute_shell('printf "%s" "$USER_MESSAGE"', fits)[1]["LOOP_V_1"] == fits.user_message


class BigJson:
    structured_output = "enforced"
    name = "big-json"

    def run(self, request, on_chunk):
        return AgentResult(text="", structured={"text": "z" * 5000})


def test_a_structured_answer_longer_than_the_cap_fails_its_step(settings):
    settings.LOOP_MAX_OUTPUT_BYTES = 4096
    request = AgentRequest(prompt="p", workdir=".")
    with pytest.raises(StepFailed, match=r"the structured output is 4\.9 KB, more than the 4 KB"):
        call_agent(BigJson(), request, lambda chunk: None, {"type": "object"})
