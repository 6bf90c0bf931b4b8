"""The node kinds of the kernel's own recipes (YAML workflows), as `NodeRun.Kind`."""

from django.db import models


class NodeKind(models.TextChoices):
    """The kernel's own node kinds, and `agent` (a call a kind runs outside a loop node).
    A loop kind adds its own (`LoopKind.nodes` in runs/kinds.py), so `NodeRun.kind` is
    not limited to these and has no choices."""

    BASH = "bash"
    SCRIPT = "script"
    PROMPT = "prompt"
    COMMAND = "command"
    APPROVAL = "approval"
    CANCEL = "cancel"
    WORKFLOW = "workflow"
    LOOP = "loop"
    LOOP_GROUP = "loop_group"
    AGENT = "agent"


# Steps a worker runs once (bash, prompt, command, script).
STEP_KINDS = (NodeKind.BASH, NodeKind.PROMPT, NodeKind.COMMAND, NodeKind.SCRIPT)
