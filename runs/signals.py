"""The kernel's signals: what happened to a run, for apps that are not part of the kernel
to act on (notifications connects its receivers in `NotificationsConfig.ready()`; the
kernel imports none of them).

Each is sent inside the transaction of the change it reports, after the change's RunEvent:
a receiver that writes rows (a delivery to send) commits or rolls back with it, and one
that raises rolls the change back, as any part of the transition would."""

from django.dispatch import Signal

# A run reached a terminal status (`Run.set_status`): run=, status= (the new status).
run_ended = Signal()

# A node stopped at a gate that waits for a decision (`NodeRun.pause`): run=, gate=.
gate_opened = Signal()

# A gate's deadline passed and the sweep recorded its one reminder (`Gate.remind`):
# run=, gate=, now= (the sweep's clock, which the reminder's wording counts from).
gate_reminded = Signal()

# A gate's first deadline passed and it names `escalate_to` (the sweep): run=, gate=, now=.
# Receivers tell those groups and people (notifications mails them their decision links).
gate_escalated = Signal()
