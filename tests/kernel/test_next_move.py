"""What a loop does after an iteration is decided once (`next_move`): the full transaction
(`settle_loop`) and the one-statement path ask the same rule."""

from types import SimpleNamespace

import pytest

from loops.workflow.loop import COMPLETE, FAIL, GATE, GO_ON, next_move


def loop(*, interactive=False, signal_completes=False, max_iterations=3):
    return SimpleNamespace(
        interactive=interactive, signal_completes=signal_completes, max_iterations=max_iterations
    )


@pytest.mark.parametrize(
    "spec,number,fired,move",
    [
        (loop(), 1, [], GO_ON),
        (loop(), 3, [], FAIL),  # max_iterations without a signal
        (loop(), 2, ["done"], COMPLETE),
        (loop(), 3, ["done"], COMPLETE),  # the signal on the last iteration still completes
        (loop(interactive=True), 1, [], GATE),
        (loop(interactive=True), 3, [], FAIL),
        (loop(interactive=True), 1, ["done"], GATE),  # a person accepts the signal
        (loop(interactive=True, signal_completes=True), 1, ["done"], COMPLETE),
    ],
)
def test_the_move_after_an_iteration(spec, number, fired, move):
    assert next_move(spec, number, fired) == move
