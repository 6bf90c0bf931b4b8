"""A toy loop kind that lives only here: the proof that a kind plugs into the kernel from
outside `runs/` (docs/architecture.md, "Adding a kind"). It counts: each iteration says its
number, a person decides at a gate after `gate_after` of them, and `rounds` ends it."""
