"""A repository with the peer's `.archon/` layout, written into a temporary folder.

.archon/commands/summarize.md            overrides commands/defaults/summarize.md
.archon/commands/defaults/{summarize,plan}.md
.archon/scripts/lists/items.py           a named uv script (one subfolder deep)
.archon/workflows/blocks/prepare-block.yaml     a block with inputs, for include:
.archon/workflows/children/handle-item.yaml     the child of the fan-out (fails on one item)
.archon/workflows/fan-all-done.yaml, fan-all-success.yaml   bash + script + include + fan_out
.archon/workflows/pack/release/release.yaml     a packaged workflow, its own commands/scripts
.archon/workflows/legacy/racing.yaml, grouped-child.yaml    refused, with a reason
"""

from __future__ import annotations

import textwrap
from pathlib import Path

FILES = {
    "commands/summarize.md": "Summarize (the repository's own): $ARGUMENTS\n",
    "commands/defaults/summarize.md": "Summarize (bundled with the peer): $ARGUMENTS\n",
    "commands/defaults/plan.md": "Plan the change for: $ARGUMENTS\n",
    "scripts/lists/items.py": """
        import json
        import os

        # The prepared text arrives as data, never as code.
        prepared = os.environ["INPUTS_PREPARED"]
        print(json.dumps(["alpha", "fail-me", prepared.split()[-1]]))
    """,
    "workflows/blocks/prepare-block.yaml": """
        name: prepare-block
        description: Building block - shapes a topic
        inputs:
          topic: {required: true}
          style: {default: plain}
        returns: shape
        nodes:
          - id: gather
            bash: echo "gathered $INPUTS.topic"
          - id: shape
            depends_on: [gather]
            runtime: uv
            script: |
              import os
              print(os.environ["INPUTS_STYLE"], os.environ["INPUTS_TOPIC"].split()[-1])
          - id: audit
            depends_on: [shape]
            bash: echo audited
    """,
    "workflows/children/handle-item.yaml": """
        name: handle-item
        description: Handles one item; refuses 'fail-me'
        nodes:
          - id: handle
            bash: |
              if [ "$ARGUMENTS" = "fail-me" ]; then
                echo "cannot handle $ARGUMENTS" >&2
                exit 3
              fi
              echo "handled $ARGUMENTS"
    """,
    "workflows/pack/release/release.yaml": """
        name: release
        provider: demo
        nodes:
          - id: notes
            command: notes
          - id: stamp
            script: stamp
            runtime: uv
    """,
    "workflows/pack/release/commands/notes.md": "Write release notes for $ARGUMENTS.\n",
    "workflows/pack/release/scripts/stamp.py": "print('stamped')\n",
    "workflows/legacy/plan-and-sum.yaml": """
        name: plan-and-sum
        provider: demo
        nodes:
          - id: plan
            command: plan
          - id: sum
            command: summarize
            depends_on: [plan]
    """,
    "workflows/legacy/racing.yaml": """
        name: racing
        nodes:
          - id: list
            bash: echo '["a"]'
          - id: race
            workflow: handle-item
            depends_on: [list]
            fan_out: {items: $list.output, join: first_success}
    """,
    "workflows/legacy/grouped-child.yaml": """
        name: grouped-child
        nodes:
          - id: g
            loop_group:
              until_bash: "true"
              max_iterations: 2
              nodes:
                - id: sub
                  workflow: handle-item
    """,
}

FAN = """
    name: fan-{join}
    description: bash, a named uv script, an included block, a fan-out ({join})
    nodes:
      - id: setup
        bash: echo "setup for $USER_MESSAGE"
      - id: prepare
        include: prepare-block
        depends_on: [setup]
        with:
          topic: $setup.output
      - id: list
        script: items
        runtime: uv
        depends_on: [prepare]
        with:
          prepared: $prepare.output
      - id: each
        workflow: handle-item
        depends_on: [list]
        fan_out:
          items: $list.output
          max_parallel: 2
          join: {join}
      - id: report
        depends_on: [each]
        runtime: uv
        with:
          results: $each.output
        script: |
          import json, os
          results = json.loads(os.environ["INPUTS_RESULTS"])
          failed = [r for r in results if isinstance(r, dict) and r.get("archon_failed")]
          print(f"{{len(results) - len(failed)}} of {{len(results)}} handled")
"""


def make_archon_repo(root: Path) -> Path:
    """Write the repository under `root`; returns `root` (the repository's root)."""
    archon = root / ".archon"
    files = dict(FILES)
    for join in ("all_done", "all_success"):
        files[f"workflows/fan-{join.replace('_', '-')}.yaml"] = FAN.format(join=join)
    for relative, text in files.items():
        path = archon / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
    return root


# What sync makes of the repository: slug -> valid?
EXPECTED_VALID = {
    "prepare-block": True,
    "handle-item": True,
    "fan-all-done": True,
    "fan-all-success": True,
    "release": True,
    "plan-and-sum": True,
    "racing": False,
    "grouped-child": False,
}
