"""Before and after, side by side: run a benchmark from two source trees, alternating.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379/0 \\
        .venv/bin/python bench/compare.py engine_overhead --tree before=DIR [--tree name=DIR]
            [--rounds 3] [-- ARGS FOR THE BENCHMARK]

Each DIR is an unpacked copy of other code (`git archive <commit> | tar -x -C DIR`). Each
round runs the benchmark once from every DIR and then from this tree ("after"), in turn,
on the same machine, PostgreSQL and Redis, so that the load of a shared machine falls on
all alike. Only the ratios between figures of one round are meaningful on a busy machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.harness import RESULTS, ROOT, median


def _mode(by_mode: dict):
    """engine_overhead's figures of one worker connection mode: `reuse` (the default)
    when it ran, else the first it ran."""
    return by_mode["reuse"] if "reuse" in by_mode else next(iter(by_mode.values()))


# Figures printed per benchmark: (label, how to read it from the JSON figures).
COLUMNS = {
    "engine_overhead": [
        ("no-op ms/step", lambda f: _mode(f["ms_per_step"])["noop"]),
        ("floor ms/step", lambda f: _mode(f["ms_per_step"])["raw"]),
        ("engine ms/step", lambda f: _mode(f["ms_per_step"])["engine"]),
        ("engine / floor", lambda f: _mode(f["engine_vs_raw_floor"])),
        ("queries / it", lambda f: f["queries"]["by_iteration"]["1"]),
    ],
    "scale_out": [
        ("1 worker s", lambda f: f["one_worker"]["seconds"]),
        ("2 workers s", lambda f: f["two_workers"]["seconds"]),
        ("speed-up", lambda f: f["speedup"]),
        (
            "lost + duplicated",
            lambda f: sum(
                f[w]["check"][k]
                for w in ("one_worker", "two_workers")
                for k in ("lost", "duplicate_rows", "duplicate_completions")
            ),
        ),
    ],
    "gate_latency": [
        ("p50 ms", lambda f: f["p50_ms"]),
        ("p95 ms", lambda f: f["p95_ms"]),
        ("max ms", lambda f: f["max_ms"]),
        ("approve() p50 ms", lambda f: f["approve_call_p50_ms"]),
    ],
}


def run_once(tree: Path, benchmark: str, args: list[str]) -> dict:
    script = tree / "bench" / f"{benchmark}.py"
    result = tree / "bench" / "results" / f"{benchmark}.json"
    result.unlink(missing_ok=True)
    subprocess.run([sys.executable, str(script), *args], cwd=tree, check=True)
    return json.loads(result.read_text())["figures"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("benchmark", choices=sorted(COLUMNS))
    parser.add_argument("--tree", action="append", required=True, help="name=DIR, repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    argv = sys.argv[1:]
    passed = argv[argv.index("--") + 1 :] if "--" in argv else []
    options = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    options.args = passed  # after `--`: given to the benchmark itself
    trees = {}
    for spec in options.tree:
        name, _, folder = spec.partition("=")
        trees[name] = Path(folder).resolve()
    trees["after"] = ROOT
    figures: dict[str, list[dict]] = {name: [] for name in trees}
    for number in range(options.rounds):
        for name, tree in trees.items():
            print(f"\n== round {number + 1}/{options.rounds}: {name} ({tree})", flush=True)
            figures[name].append(run_once(tree, options.benchmark, options.args))
    columns = COLUMNS[options.benchmark]
    print(f"\n{options.benchmark}: before/after, {options.rounds} alternating rounds")
    print("| code | " + " | ".join(label for label, _ in columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    table = {}
    for name, rounds in figures.items():
        values = {label: [read(f) for f in rounds] for label, read in columns}
        table[name] = values
        cells = [f"{median(v):.2f} ({' / '.join(f'{x:.1f}' for x in v)})" for v in values.values()]
        print(f"| {name} | " + " | ".join(cells) + " |")
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"compare_{options.benchmark}.json"
    payload = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "trees": {name: str(tree) for name, tree in trees.items()},
        "rounds": figures,
        "columns": table,
    }
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    print(f"\nwrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
