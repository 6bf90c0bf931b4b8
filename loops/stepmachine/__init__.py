"""Step-machine recipes (`schema: planeai.loop.recipe.v1`) on the run kernel.

A run of one is an ordinary `Run`. Its node `steps` (kind `stepmachine`) carries the
runner's state (current step, round, ticks, last error); each role's sessions are nodes of
kind `session` whose iterations are the agent's turns; a `human.wait` is a `Gate` on
`steps`; every tick and handoff is a `RunEvent`. The runner (`runner.tick`) is sent
through `runs.dispatch` like all work, and executes at most ten steps per trigger.
"""
