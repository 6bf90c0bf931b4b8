"""Agent-driven loops: a host agent composes a pipeline from its pool and runs, judges and
re-runs it through three tools (core_start_loop, core_iterate_loop, core_finish_loop).

The recipe kind is `kind: driven` (loops/driven/format.py). A driven run is a Run of the
kernel: its one node (the host, kind `driven`) is claimed by a worker (`runner.py`); the
host's turn and every pipeline step are Iterations; every crumb is a RunEvent. Loops and
their iterations are kept here (`models.py`) and served read-only (`api.py`, `views.py`).
"""
