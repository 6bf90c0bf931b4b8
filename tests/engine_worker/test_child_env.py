"""What a bash step or an agent process sees of the worker's environment."""

import json

from runs import services
from runs.actor import ENGINE
from runs.sandbox import child_env, inherited
from tests.conftest import wait_run


def test_a_bash_step_sees_only_the_allowed_environment(live_worker, make_scripted_recipe):
    run = services.start_run(
        make_scripted_recipe("""
nodes:
  - id: env
    bash: python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'
"""),
        actor=ENGINE,
        message="hello",
    )
    wait_run(run, "completed", "failed")
    assert run.status == "completed", run.error
    seen = json.loads(run.nodes.get(node_id="env").output)
    # The worker runs with these (tests/conftest.py worker_env): none may reach the child.
    for secret in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE", "LOOP_QUEUE"):
        assert secret not in seen
    assert seen["PATH"] and seen["USER_MESSAGE"] == "hello"


def test_child_env_keeps_secrets_and_other_providers_keys_out(monkeypatch, settings):
    settings.LOOP_CHILD_ENV = ["MY_TOOL_HOME"]
    for name, value in {
        "SECRET_KEY": "s",
        "OPENAI_API_KEY": "o",
        "ANTHROPIC_API_KEY": "a",
        "MY_TOOL_HOME": "/opt/tool",
        "LC_ALL": "C.UTF-8",
    }.items():
        monkeypatch.setenv(name, value)
    env = child_env({"LOOP_RUN_ID": "7"})
    assert "SECRET_KEY" not in env and "OPENAI_API_KEY" not in env
    assert "ANTHROPIC_API_KEY" not in env
    assert env["MY_TOOL_HOME"] == "/opt/tool" and env["LC_ALL"] == "C.UTF-8"
    assert env["LOOP_RUN_ID"] == "7"
    # A provider kind passes on its own key only (claude: the Anthropic one).
    assert inherited("ANTHROPIC_API_KEY", "CLAUDE_CONFIG_DIR") == {"ANTHROPIC_API_KEY": "a"}
