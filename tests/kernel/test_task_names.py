"""Tasks a loop kind or another app hands the kernel carry their own app's Celery name, and
the name they had while they lived in runs/tasks.py stays registered: a message queued
under it before an upgrade still runs the same work. Sending uses the new name."""

from __future__ import annotations

import pytest

from console.celery import app
from loops.stepmachine import runner
from loops.stepmachine import tasks as stepmachine_tasks
from loops.workflow import group
from loops.workflow import tasks as workflow_tasks
from notifications import sending
from notifications import tasks as notification_tasks
from runs import dispatch

# task sent by name -> (its Celery name, the name it had in runs/tasks.py, where its work
# is, its arguments)
MOVED = {
    "stepmachine.tick_machine": (
        "stepmachine.tick_machine",
        "runs.tasks.tick_machine",
        (runner, "tick"),
        (7,),
    ),
    "notifications.send_notification": (
        "notifications.send_notification",
        "runs.tasks.send_notification",
        (sending, "send"),
        (7,),
    ),
    "workflow.finish_group_iteration": (
        "workflow.finish_group_iteration",
        "runs.tasks.finish_group_iteration",
        (group, "finish_iteration"),
        (7, 2),
    ),
}


@pytest.mark.parametrize("task_name", MOVED)
def test_both_names_are_registered_with_the_celery_app(task_name):
    new, old, _, _ = MOVED[task_name]
    assert new in app.tasks and old in app.tasks
    assert dispatch.task(task_name).name == new  # shared_task hands out a proxy of app.tasks[new]


@pytest.mark.parametrize("task_name", MOVED)
def test_sending_uses_the_new_name(task_name, monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args=None, *_, **__: sent.append(name))
    dispatch.send_now(task_name, *MOVED[task_name][3])
    assert sent == [MOVED[task_name][0]]


@pytest.mark.parametrize("task_name", MOVED)
def test_a_message_under_the_old_name_does_the_same_work(task_name, monkeypatch):
    _, old, (module, work), args = MOVED[task_name]
    done = []
    monkeypatch.setattr(module, work, lambda *given: done.append(given))
    app.tasks[old](*args)  # as a worker runs a message that arrived under the old name
    assert done == [args]


def test_the_old_names_are_kept_apart_from_the_tasks_the_kernel_sends():
    assert stepmachine_tasks.tick_machine_under_old_name.name == "runs.tasks.tick_machine"
    assert notification_tasks.send_notification_under_old_name.name == (
        "runs.tasks.send_notification"
    )
    assert workflow_tasks.finish_group_iteration_under_old_name.name == (
        "runs.tasks.finish_group_iteration"
    )
