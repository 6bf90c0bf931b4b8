"""The bundled no-mistakes demo: a small git repository made on demand, and the demo
agent's behaviour as a step machine's role.

The repository has a `main` branch and a `feature/greeting` branch whose new test fails
(greet() forgets its punctuation). The demo agent (`provider: demo`), given the
`record_handoff` tool, plays a role deterministically: it reviews by reading the diff,
fixes the one bug this repository was built with when told tests failed, documents the
new function in the README, rebases when asked, and records a handoff each turn.
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

from runs.providers.base import AgentRequest, AgentResult, OnChunk
from runs.sandbox import files
from runs.worktree import git

from .context import RERUN_HEADING

FEATURE_BRANCH = "feature/greeting"

FILES_MAIN = {
    "README.md": "# Greeter\n\nA tiny library for the Loop Console demo.\n\n## Functions\n\n"
    "- `add(a, b)`: the sum of two numbers.\n",
    "AGENTS.md": "Agents working here: keep changes small, run `python3 -m unittest`, "
    "write conventional commit messages.\n",
    "CONTEXT.md": "The library's functions are documented in README.md (one line each).\n",
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": "import unittest\n\nfrom calc import add\n\n\n"
    "class AddTest(unittest.TestCase):\n    def test_add(self):\n"
    "        self.assertEqual(add(2, 3), 5)\n",
    ".gitignore": "__pycache__/\n",
    # `make ci` is no-mistakes' default test command.
    "Makefile": "ci:\n\tpython3 -m unittest -q\n",
}
FILES_FEATURE = {
    "greeting.py": 'def greet(name):\n    return "Hello " + name\n',
    "test_greeting.py": "import unittest\n\nfrom greeting import greet\n\n\n"
    "class GreetTest(unittest.TestCase):\n    def test_greet(self):\n"
    '        self.assertEqual(greet("Ada"), "Hello, Ada!")\n',
}
# The bug the feature branch was built with, and its fix: what the demo agent "knows".
FIXES = [("greeting.py", 'return "Hello " + name', 'return f"Hello, {name}!"')]
DOC_LINE = "- `greet(name)`: a friendly greeting for `name`.\n"
DEMO_FILE_LIMIT = 1 << 20  # the demo repository's files are tiny


def _git(*args, cwd) -> str:
    done = git(*args, cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def create_repository(root: Path) -> Path:
    """A fresh demo repository under `root` (a new folder each time: a merged demo stays)."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"greeter-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:4]}"
    path.mkdir()
    _git("init", "-q", "-b", "main", cwd=path)
    for name, text in FILES_MAIN.items():
        (path / name).write_text(text)
    _git("add", "-A", cwd=path)
    _git("commit", "-q", "-m", "feat: add()", cwd=path)
    _git("checkout", "-q", "-b", FEATURE_BRANCH, cwd=path)
    for name, text in FILES_FEATURE.items():
        (path / name).write_text(text)
    _git("add", "-A", cwd=path)
    _git("commit", "-q", "-m", "feat: greet people by name", cwd=path)
    _git("checkout", "-q", "main", cwd=path)
    return path


# --- the demo agent as a role ----------------------------------------------------------------


def _this_step(prompt: str) -> str:
    found = re.search(r"# This step\n\n(.*?)(?:\n# Handing off|\Z)", prompt, re.S)
    return found.group(1) if found else prompt


def plays_role(request: AgentRequest) -> bool:
    """Whether the demo agent is asked to play a step machine's role: it was given the
    `record_handoff` tool."""
    return bool(request.tools and request.tools.get("record_handoff"))


def role_turn(provider, request: AgentRequest, on_chunk: OnChunk) -> AgentResult:
    session_id = request.session_id or uuid.uuid4().hex
    role = request.tools.context.role
    step = _this_step(request.prompt)
    workdir = request.workdir
    if request.read_only:
        status, summary = _review(step, workdir)
    elif re.search(r"\b(tests?|lint) failed", step, re.I):
        status, summary = _fix(workdir, rerun=RERUN_HEADING in request.prompt)
    elif "documentation" in step.lower():
        status, summary = _document(workdir)
    elif "up to date with" in step:
        status, summary = _rebase(step, workdir)
    elif "reviewer found issues" in step:
        status, summary = "completed", "Nothing in the review needed a fix."
    elif "Push the branch" in step:
        status, summary = (
            "completed",
            "No pull-request service here: the console records a review request for a person "
            "to merge.",
        )
    else:
        status, summary = "completed", "Nothing to do for this step."
    text = f"Demo {role}: {summary}\n"
    for piece in re.findall(r"\S+\s*", text):
        on_chunk(piece)
        if provider.delay:
            time.sleep(provider.delay)
    answer = request.tools.call("record_handoff", {"status": status, "summary": summary})
    note = f"[handoff {status}: {'recorded' if answer.ok else answer.content}]\n"
    on_chunk(note)
    return AgentResult(
        text=text + note,
        session_id=session_id,
        tokens_in=len(request.prompt.split()),
        tokens_out=len(text.split()),
    )


def _review(step: str, workdir: str) -> tuple[str, str]:
    found = re.search(r"between (\S+) and (\S+?)\.?\s*$", step, re.M)
    if not found:
        return "completed", "Reviewed the working tree: no findings."
    base, branch = found.group(1), found.group(2)
    stat = git("diff", "--shortstat", f"{base}...{branch}", cwd=workdir).stdout.strip()
    return "completed", f"Reviewed {branch} against {base} ({stat or 'no changes'}): no findings."


def _fix(workdir: str, *, rerun: bool = False) -> tuple[str, str]:
    fixed = []
    for name, bug, fix in FIXES:
        text = _read(workdir, name)
        if text is not None and bug in text and _write(workdir, name, text.replace(bug, fix)):
            fixed.append(name)
    if not fixed and rerun:
        # The interrupted attempt of this turn got as far as the fix (turns.rerun_note).
        return "completed", "An earlier attempt of this turn already fixed it; nothing is left."
    if not fixed:
        return "needs_human", "The failure is not one the demo agent knows how to fix."
    _git(
        "commit",
        "-q",
        "-am",
        "fix: greet() says hello with a comma and an exclamation mark",
        cwd=workdir,
    )
    return "completed", f"Fixed the root cause in {', '.join(fixed)}: greet() now punctuates."


def _document(workdir: str) -> tuple[str, str]:
    text = _read(workdir, "README.md")
    if text is None or _read(workdir, "greeting.py") is None:
        return "completed", "No documentation change needed."
    if "greet(" in text:
        return "completed", "The README already documents greet()."
    if not _write(workdir, "README.md", text + DOC_LINE):
        return "completed", "README.md could not be written: no documentation change."
    _git("commit", "-q", "-am", "docs: document greet() in the README", cwd=workdir)
    return "completed", "Documented greet() in README.md, the owner document of functions."


# The demo role runs in the worker, not in a sandbox: the tree's files are read and written
# like any file an agent could have replaced (runs/sandbox/files.py).
def _read(workdir: str, name: str) -> str | None:
    """A small regular file of the tree (None if missing, too long, a link, a FIFO...)."""
    try:
        found = files.read_file(workdir, name, limit=DEMO_FILE_LIMIT)
    except OSError:
        return None
    return None if found.cut else found.text()


def _write(workdir: str, name: str, text: str) -> bool:
    try:
        files.write_file(workdir, name, text.encode("utf-8"))
    except OSError:
        return False
    return True


def _rebase(step: str, workdir: str) -> tuple[str, str]:
    found = re.search(r"up to date with (\S+?)\.?\s", step + " ")
    target = found.group(1) if found else "main"
    if git("merge-base", "--is-ancestor", target, "HEAD", cwd=workdir).returncode == 0:
        return "completed", f"The branch is already up to date with {target}."
    done = git("rebase", target, cwd=workdir)
    if done.returncode != 0:
        git("rebase", "--abort", cwd=workdir)
        return "needs_human", f"Rebasing onto {target} conflicts: a person must resolve it."
    return "completed", f"Rebased the branch onto {target}."
