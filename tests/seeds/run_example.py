"""Run a design's Python example as its book does, in a plain script with a top-level
`await`, and print what it returned as JSON: `python -m tests.seeds.run_example FILE`."""

import ast
import asyncio
import json
import sys
from pathlib import Path


def main(path: str) -> None:
    code = compile(Path(path).read_text(), path, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    scope: dict = {"__name__": "__example__"}
    pending = eval(code, scope)  # noqa: S307 - the test's own file, run as a script would
    if pending is not None:
        asyncio.run(pending)
    result = scope["result"]
    print(
        json.dumps(
            {
                "status": str(result.status),
                "iterations": result.iterations,
                "score": result.output.score,
                "scores": [r.output.score for r in result.results if hasattr(r.output, "score")],
                "agents": [r.agent for r in result.results],
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1])
