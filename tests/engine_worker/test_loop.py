"""Loop nodes through a real worker: completion channels, limits, timeouts, sessions."""

from runs import services
from runs.actor import ENGINE
from tests.conftest import wait_run

from .conftest import calls, iterations, node


def start(recipe, message="go", **kw):
    return services.start_run(recipe, ENGINE, message=message, **kw)


def test_tag_signal_completes_and_is_stripped(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@1: working\\n@2: done <PROMISE> complete </promise> bye"
      until: COMPLETE
      max_iterations: 5
  - id: after
    depends_on: [work]
    bash: printf '%s' $work.output
""")
    )
    wait_run(run)
    assert run.status == "completed", run.error
    its = iterations(run, "work")
    assert [it.channels for it in its] == [[], ["until"]]
    assert "<promise>" not in its[1].output.lower() and "bye" in its[1].output
    assert "promise" not in node(run, "after").output.lower()


def test_plain_signal_at_end_or_on_own_line_but_not_mid_sentence(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@1: I will say COMPLETE when done\\n@2: nearly\\\\nCOMPLETE\\\\nnotes\\n@3: x"
      until: COMPLETE
      max_iterations: 5
""")
    )
    wait_run(run)
    assert run.status == "completed"
    assert [it.channels for it in iterations(run, "work")] == [[], ["until"]]


def test_max_iterations_fails_the_node_with_a_clear_error(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@*: still going"
      until: COMPLETE
      max_iterations: 3
""")
    )
    wait_run(run)
    assert run.status == "failed"
    work = node(run, "work")
    assert work.status == "failed" and work.iteration_count == 3
    assert "max_iterations (3)" in work.error and "until: COMPLETE" in work.error
    assert len(iterations(run, "work")) == 3


def test_until_bash_alone_ends_the_loop(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@*: touching\\n@sleep *: 0"
      until_bash: "echo x >> ticks; test $(wc -l < ticks) -ge 2"
      max_iterations: 5
""")
    )
    wait_run(run)
    assert run.status == "completed"
    assert [it.channels for it in iterations(run, "work")] == [[], ["until_bash"]]


def test_until_bash_is_skipped_once_the_signal_fired(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@1: first\\n@2: <promise>DONE</promise>"
      until: DONE
      until_bash: "echo ran >> $ARTIFACTS_DIR/bash-runs; exit 1"
      max_iterations: 5
""")
    )
    wait_run(run)
    assert run.status == "completed"
    from pathlib import Path

    from django.conf import settings

    ran = Path(settings.LOOP_DATA_DIR, "runs", str(run.pk), "artifacts", "bash-runs").read_text()
    assert ran.count("ran") == 1  # only iteration 1; iteration 2's signal skipped it
    assert iterations(run, "work")[-1].channels == ["until"]


def test_until_field_requires_strict_true(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: triage
    output_format:
      type: object
      properties:
        done: {description: no type declared, so "true" and 1 validate}
        left: {type: integer}
      required: [done]
    loop:
      prompt: "@1: {\\"done\\": \\"true\\", \\"left\\": 2}\\n@2: {\\"done\\": 1, \\"left\\": 1}\\n@3: {\\"done\\": true, \\"left\\": 0}"
      until_field: done
      max_iterations: 5
  - id: next
    depends_on: [triage]
    bash: printf 'left=%s' $triage.output.left
""")
    )
    wait_run(run)
    assert run.status == "completed", run.error
    its = iterations(run, "triage")
    assert [it.channels for it in its] == [[], [], ["until_field"]]
    assert its[-1].structured == {"done": True, "left": 0}
    assert node(run, "next").output == "left=0"


def test_invalid_structured_payload_fails_after_reasks(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: triage
    output_format:
      type: object
      properties: {done: {type: boolean}}
      required: [done]
    loop:
      prompt: "@*: not json at all"
      until_field: done
      max_iterations: 5
""")
    )
    wait_run(run)
    assert run.status == "failed"
    assert "output_format" in node(run, "triage").error
    # the first answer and three re-asks, all inside iteration 1
    assert len(calls(run)) == 4 and len(iterations(run, "triage")) == 1


def test_an_iteration_that_raises_fails_the_node_at_once(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@1: ok\\n@2: boom\\n@exit 2: 3"
      until: COMPLETE
      max_iterations: 5
""")
    )
    wait_run(run)
    assert run.status == "failed"
    assert [it.status for it in iterations(run, "work")] == ["completed", "failed"]
    assert "exited with status 3" in node(run, "work").error


def test_idle_timeout_keeps_output_and_continues(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    idle_timeout: 1500
    loop:
      prompt: "@idle 1: 30\\n@2: <promise>COMPLETE</promise>"
      until: COMPLETE
      max_iterations: 3
""")
    )
    wait_run(run)
    assert run.status == "completed"
    first, second = iterations(run, "work")
    assert first.status == "timed_out" and "thinking quietly" in first.output
    assert second.channels == ["until"]


def test_prev_output_and_session_threading(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "prev=[$LOOP_PREV_OUTPUT]\\n@1: one\\n@2: two\\n@3: COMPLETE"
      until: COMPLETE
      max_iterations: 3
      fresh_context: false
""")
    )
    wait_run(run)
    assert run.status == "completed"
    seen = calls(run)
    assert "prev=[]" in seen[0]["prompt"] and "prev=[one]" in seen[1]["prompt"]
    assert "prev=[two]" in seen[2]["prompt"]
    assert [c["resume"] for c in seen] == [False, True, True]
    assert len({c["session"] for c in seen}) == 1


def test_fresh_context_starts_a_new_session_each_iteration(live_worker, make_scripted_recipe):
    run = start(
        make_scripted_recipe("""
nodes:
  - id: work
    loop:
      prompt: "@1: one\\n@2: COMPLETE"
      until: COMPLETE
      max_iterations: 3
      fresh_context: true
""")
    )
    wait_run(run)
    seen = calls(run)
    assert [c["resume"] for c in seen] == [False, False]
    assert seen[0]["session"] != seen[1]["session"]


def test_hostile_values_reach_bash_as_plain_text(live_worker, make_scripted_recipe, tmp_path):
    marker = tmp_path / "pwned"
    payload = f"$(touch {marker}) `touch {marker}`; touch {marker} && echo 'x' \"y\" $HOME"
    run = start(
        make_scripted_recipe("""
nodes:
  - id: echo
    bash: printf '%s' $USER_MESSAGE
  - id: again
    depends_on: [echo]
    bash: printf '%s' $echo.output
  - id: work
    depends_on: [again]
    loop:
      prompt: "@*: $USER_MESSAGE"
      until_bash: "test -n $work.output; printf '%s' $USER_MESSAGE > seen.txt"
      max_iterations: 1
"""),
        message=payload,
    )
    wait_run(run)
    assert run.status == "completed", run.error
    assert node(run, "echo").output == payload
    assert node(run, "again").output == payload
    assert not marker.exists()
