"""A repository in the peer's `.archon/` layout written the way the peer's own workflows are:
values pasted into literal text, literal fan-out lists, model aliases in config.yaml.

.archon/config.yaml                         default assistant `house`, alias `@mini`
.archon/workflows/peer-item.yaml            the fan-out child: fails on `fail-*`
.archon/workflows/peer-fan-all-done.yaml    fan-out over '["one", "two", "fail-3"]' (JSON text)
.archon/workflows/peer-fan-all-success.yaml the same list as a YAML list, join all_success
.archon/workflows/peer-join.yaml            trigger rules over a failing node, asserted in bash
.archon/workflows/peer-literal.yaml         single quotes, a quoted heredoc, TS and Python literals
.archon/workflows/peer-checked.yaml         arithmetic through a copy, python3 -c
.archon/workflows/peer-models.yaml          `model: '@mini'`, and a node with no provider
"""

from __future__ import annotations

import textwrap
from pathlib import Path

# Both providers print which of them answered and the model they were asked for.
PROVIDERS = """
providers:
  house: {kind: command, command: 'printf "house:%s" "$LOOP_MODEL"'}
  mini-agent: {kind: command, command: 'printf "mini:%s" "$LOOP_MODEL"'}
"""

FILES = {
    "config.yaml": """
        assistant: house
        aliases:
          '@mini': {provider: mini-agent, model: tiny-1}
    """,
    "workflows/peer-item.yaml": """
        name: peer-item
        nodes:
          - id: handle
            bash: |
              case "$ARGUMENTS" in
                fail-*) echo "refusing $ARGUMENTS" >&2; exit 3 ;;
              esac
              echo "did $ARGUMENTS"
    """,
    "workflows/peer-fan-all-done.yaml": """
        name: peer-fan-all-done
        nodes:
          - id: each
            workflow: peer-item
            fan_out:
              items: '["one", "two", "fail-3"]'
              join: all_done
          - id: check
            depends_on: [each]
            runtime: bun
            with: {results: $each.output}
            script: |
              const results: unknown[] = JSON.parse(process.env.INPUTS_RESULTS ?? "[]");
              const failed = (r: any) => r !== null && typeof r === "object" && r.archon_failed === true;
              if (results.length !== 3 || !failed(results[2])) process.exit(1);
              console.log("ok " + results.filter((r) => !failed(r)).join(","));
    """,
    "workflows/peer-fan-all-success.yaml": """
        name: peer-fan-all-success
        nodes:
          - id: each
            workflow: peer-item
            fan_out:
              items: [one, two, fail-3]
              join: all_success
          - id: report
            depends_on: [each]
            bash: |
              echo 'never: $each.output'
    """,
    "workflows/peer-join.yaml": """
        name: peer-join
        nodes:
          - id: ok-a
            bash: echo a
          - id: ok-b
            bash: echo b
          - id: bad
            bash: exit 2
          - id: join-all-success
            depends_on: [ok-a, bad]
            bash: echo never
          - id: join-all-done
            depends_on: [ok-a, ok-b, bad]
            trigger_rule: all_done
            bash: |
              echo 'done: $ok-a.output $ok-b.output'
          - id: join-one
            depends_on: [ok-a, bad]
            trigger_rule: one_success
            bash: echo one
          - id: join-none-failed
            depends_on: [ok-a, bad]
            trigger_rule: none_failed_min_one_success
            bash: echo never
          - id: assert
            depends_on: [join-all-done, join-one]
            bash: |
              test '$join-all-done.output' = 'done: a b'
              test '$join-one.output' = one
              echo asserted
    """,
    "workflows/peer-literal.yaml": """
        name: peer-literal
        nodes:
          - id: say
            bash: printf '%s' "$ARGUMENTS"
          - id: quoted
            depends_on: [say]
            bash: |
              echo 'said: $say.output.'
          - id: compare
            depends_on: [say]
            bash: test '$say.output' = "$ARGUMENTS" && echo same
          - id: heredoc
            depends_on: [say]
            bash: |
              cat <<'EOF'
              $HOME stays; `date` stays; message: $ARGUMENTS
              EOF
          - id: ts
            depends_on: [say]
            runtime: bun
            script: |
              const args: string = "$ARGUMENTS";
              const said = '$say.output';
              console.log(`ts ${args.length} [$say.output] ${said === args}`);
          - id: py
            depends_on: [say]
            runtime: uv
            script: |
              args = "$ARGUMENTS"
              print(f"py {len(args)} [{args}]", '$say.output' == args)
    """,
    "workflows/peer-checked.yaml": """
        name: peer-checked
        nodes:
          - id: count
            bash: printf '%s' "$ARGUMENTS"
          - id: arith
            depends_on: [count]
            bash: |
              n=$count.output
              echo $(( n * 2 ))
          - id: pyc
            depends_on: [arith]
            bash: python3 -c "print($count.output + 1)"
          - id: pysq
            depends_on: [pyc]
            bash: python3 -c 'print($count.output * 3)'
    """,
    "workflows/peer-models.yaml": """
        name: peer-models
        PROVIDERS
        nodes:
          - id: small
            prompt: answer briefly
            model: '@mini'
          - id: plain
            prompt: answer
          - id: insisted
            provider: house
            model: '@mini'
            prompt: answer
    """,
}


def make_peer_repo(root: Path) -> Path:
    """Write the repository under `root`; returns `root`."""
    for relative, text in FILES.items():
        path = root / ".archon" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        body = textwrap.dedent(text).lstrip("\n")
        body = body.replace("PROVIDERS\n", textwrap.dedent(PROVIDERS).lstrip("\n"))
        path.write_text(body)
    return root
