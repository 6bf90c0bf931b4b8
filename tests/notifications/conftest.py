import pytest


@pytest.fixture(autouse=True)
def webhook_hosts(settings):
    settings.LOOP_WEBHOOK_HOSTS = ["127.0.0.1"]


APPROVAL = """
name: ship-it
nodes:
  - id: ship
    approval:
      message: Ship it?
      gate_timeout: 2h
"""

ONE_STEP = """
name: say-hello
nodes:
  - id: hello
    bash: echo hello
"""


@pytest.fixture
def in_process(monkeypatch):
    """Run what the kernel sends here, in order (no worker): returns the drain function."""
    from runs import dispatch

    sent = []
    monkeypatch.setattr(dispatch, "deliver", lambda name, *args, **kw: sent.append((name, args)))

    def drain():
        while sent:
            name, args = sent.pop(0)
            dispatch.task(name)(*args)

    return drain
