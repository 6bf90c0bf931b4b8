"""The run kernel driven in this process: `dispatch.deliver` is replaced by a list, and
`Broker.deliver` runs what was sent, in order, like a worker would."""

from __future__ import annotations

import pytest

from runs import dispatch


class Broker:
    def __init__(self):
        self.sent: list[tuple[str, tuple]] = []
        self.delays: list[float | None] = []  # `send_later`'s back-off, per message sent

    def send(self, name: str, *args, countdown=None) -> None:
        self.sent.append((name, args))
        self.delays.append(countdown)

    def count(self, name: str) -> int:
        return sum(1 for sent, _ in self.sent if sent == name)

    def deliver(self, limit: int = 200) -> None:
        for _ in range(limit):
            if not self.sent:
                return
            name, args = self.sent.pop(0)
            dispatch.task(name)(*args)
        raise AssertionError("the run did not settle")


@pytest.fixture
def broker(monkeypatch):
    fake = Broker()
    monkeypatch.setattr(dispatch, "deliver", fake.send)
    return fake
