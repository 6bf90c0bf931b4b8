"""YAML workflows: a graph of bash, script, prompt, loop, loop_group and approval nodes."""
