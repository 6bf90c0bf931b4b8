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
