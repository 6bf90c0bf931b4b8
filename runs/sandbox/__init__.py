"""How every child process starts: bash and `script:` steps, `until_bash` checks, gate
commands, command agents and agent CLIs, each in a bubblewrap sandbox that sees its own
workspace and nothing of the console (see bwrap.py for exactly what it sees).

    run_process(argv, sandbox=for_run(run.pk, workdir, network=False), on_chunk=...)

`LOOP_SANDBOX` (mode.py) says whether the sandbox is required, used when it works (the
default), or off; `status()` is what every surface reports.
"""

from .bwrap import may_show
from .confinement import (
    Confinement,
    Limits,
    agent_network,
    for_run,
    home_folder,
    limits_of,
    run_folder,
    step_network,
)
from .environment import child_env, inherited
from .mode import SandboxStatus, SandboxUnavailable, status
from .process import ProcessResult, kill_group, run_process
from .space import CallSpace

__all__ = [
    "CallSpace",
    "Confinement",
    "Limits",
    "agent_network",
    "ProcessResult",
    "SandboxStatus",
    "SandboxUnavailable",
    "child_env",
    "for_run",
    "home_folder",
    "inherited",
    "kill_group",
    "limits_of",
    "may_show",
    "run_folder",
    "run_process",
    "status",
    "step_network",
]
