"""Gate logs out of the agents' reach (issue 34, H1), through the real worker and the real
sandbox: a gate command that swaps its own log for a link to a secret, or plants links
where later logs would be written, gets nothing: the secret never reaches
`runtime.last_error`, the next prompt or the review page, and the file a planted link
names is never written. Each gate command proves it ran by writing a marker in its
workspace, and says what it found where the logs used to be."""

from __future__ import annotations

from pathlib import Path

import pytest

from loops.stepmachine.models import ReviewRequest
from loops.stepmachine.queries import gate_logs_of
from runs import services
from runs.actor import Actor
from runs.models import Iteration, ProviderConfig
from tests.conftest import wait_for
from tests.sandbox.conftest import requires_sandbox
from tests.stepmachine.conftest import shown

pytestmark = requires_sandbox

RECIPE = """
schema: planeai.loop.recipe.v1
id: gate-log-{name}
name: gate log {name}
policy: {{max_rounds: 2}}
roles:
  reader: {{provider: gate-reader, mode: write, isolation: project}}
steps:
  - id: check
    kind: gates.run
    role: reader
    gates:
      - name: attack
        command: |
{command}
    on: {{pass: done, fail: tell, error: tell}}
  - id: tell
    kind: session.create
    role: reader
    prompt: "The gate said: {{{{ runtime.last_error }}}}"
  - {{id: wait, kind: handoff.wait, from: reader, on: {{completed: again}}}}
  - {{id: again, kind: round.next, next: check}}
  - {{id: done, kind: loop.status, status: approved}}
"""
# Every round: the marker, then what the command sees of the logs' old and new places.
PROOF = """\
echo "gate ran" >> gate-marker.txt
ls -la "$ARTIFACTS_DIR/gates" >> gate-marker.txt 2>&1
ls "$ARTIFACTS_DIR/../gates" >/dev/null 2>&1 && echo "LEAK the gate logs' folder" >> gate-marker.txt
"""
# Its own log (any log in the old place) becomes a link to the secret.
SWAP_OWN_LOG = """\
for log in "$ARTIFACTS_DIR"/gates/*.log; do
  [ -f "$log" ] && ln -sf {secret} "$log" && echo "swapped $log" >> gate-marker.txt
done
exit 1
"""
# Links where the next rounds' logs would be written, to a file the worker can write.
PLANT_LINKS = """\
mkdir -p "$ARTIFACTS_DIR/gates"
for n in $(seq 1 60); do
  log="$ARTIFACTS_DIR/gates/check-tick$n.log"
  [ -e "$log" ] || ln -s {victim} "$log"
done
echo "LINKS SET" >> gate-marker.txt
exit 1
"""


@pytest.fixture
def reader(escape_worker, db):
    """The role's agent: it only hands off (the test reads the prompt it was sent)."""
    return ProviderConfig.objects.create(
        name="gate-reader",
        kind="command",
        command="$LOOP_HANDOFF_CMD --status completed --summary read",
    )


def _run_attack(plane_recipe, operator, name: str, script: str):
    command = "".join(f"          {line}\n" for line in (PROOF + script).splitlines())
    recipe = plane_recipe(RECIPE.format(name=name, command=command.rstrip("\n")))
    run = services.start_run(recipe, actor=Actor.operator(operator, "console"))
    shown(run, "blocked", "failed", "approved", timeout=120)
    assert run.status_word == "blocked" and "max_rounds" in run.error, run.error
    wait_for(
        lambda: not Iteration.objects.filter(run=run, status__in=("pending", "running")).exists(),
        message="the last turn to finish",
    )
    marker = (Path(run.workdir or _work(run)) / "gate-marker.txt").read_text()
    assert marker.count("gate ran") == 2, marker  # the probe ran, both rounds
    assert "LEAK" not in marker, marker
    return run, marker


def _work(run) -> Path:
    from django.conf import settings

    return Path(settings.LOOP_DATA_DIR) / "runs" / str(run.pk) / "work"


def _review_page(client, run, viewer) -> str:
    ReviewRequest.objects.create(
        run=run, repository="", branch="b", target_branch="main", head_commit="0", target_commit="0"
    )
    client.force_login(viewer)
    page = client.get(f"/runs/{run.pk}/review/")
    assert page.status_code == 200
    return page.content.decode()


def test_a_gate_that_swaps_its_own_log_for_a_link_reads_back_only_its_output(
    escape_worker, reader, plane_recipe, operator, viewer, client, tmp_path
):
    secret = tmp_path / "secret.txt"
    secret.write_text("GATE-LOG-CANARY-SECRET\n")
    script = SWAP_OWN_LOG.format(secret=secret)
    run, marker = _run_attack(plane_recipe, operator, "swap", script)
    finished = list(run.events.filter(kind="gates_finished").order_by("seq"))
    assert [e.data["result"] for e in finished] == ["fail", "fail"]
    for event in finished:
        assert "GATE-LOG-CANARY" not in event.data["tail"]
        assert "[gate attack: exit 1]" in event.data["tail"]
    prompts = [it.prompt for it in Iteration.objects.filter(run=run).order_by("id")]
    assert len(prompts) == 2 and all("[gate attack: exit 1]" in p for p in prompts)
    assert not any("GATE-LOG-CANARY" in p for p in prompts)
    turns = run.events.filter(kind="turn_sent").values_list("data__last_error", flat=True)
    assert turns and not any("GATE-LOG-CANARY" in (text or "") for text in turns)
    assert "GATE-LOG-CANARY" not in _review_page(client, run, viewer)
    assert secret.read_text() == "GATE-LOG-CANARY-SECRET\n"
    # The logs live in the run's data folder, where no sandbox mounts.
    assert {Path(e.data["log"]).parent for e in finished} == {_work(run).parent / "gates"}


def test_links_planted_where_logs_were_written_are_never_written_through(
    escape_worker, reader, plane_recipe, operator, viewer, client, tmp_path
):
    victim = tmp_path / "victim.txt"
    victim.write_text("VICTIM-UNTOUCHED\n")
    run, marker = _run_attack(plane_recipe, operator, "plant", PLANT_LINKS.format(victim=victim))
    assert marker.count("LINKS SET") == 2
    artifacts = _work(run).parent / "artifacts" / "gates"
    planted = [p for p in artifacts.iterdir() if p.is_symlink()]
    assert len(planted) >= 59  # the attack's links are there, every one unused
    assert victim.read_text() == "VICTIM-UNTOUCHED\n"
    logs = gate_logs_of(run)
    assert [log["result"] for log in logs] == ["fail", "fail"]
    assert all("[gate attack: exit 1]" in log["text"] for log in logs)
    assert "VICTIM-UNTOUCHED" not in _review_page(client, run, viewer)
