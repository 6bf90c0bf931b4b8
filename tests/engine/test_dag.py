import pytest

from runs.engine.dag import (
    TERMINAL,
    CycleError,
    UnknownDependencyError,
    find_cycle,
    find_cycles,
    layers,
    trigger_decision,
)

# --- layers ---------------------------------------------------------------------------


def test_empty_graph_has_no_layers():
    assert layers({}) == []


def test_independent_nodes_share_one_layer_in_insertion_order():
    assert layers({"c": [], "a": [], "b": []}) == [["c", "a", "b"]]


def test_chain_gives_one_node_per_layer():
    assert layers({"report": ["implement"], "implement": ["setup"], "setup": []}) == [
        ["setup"],
        ["implement"],
        ["report"],
    ]


def test_diamond():
    deps = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    assert layers(deps) == [["a"], ["b", "c"], ["d"]]


def test_insertion_order_kept_within_later_layer():
    deps = {"z": ["root"], "root": [], "m": ["root"], "a": ["root"]}
    assert layers(deps) == [["root"], ["z", "m", "a"]]


def test_node_waits_for_its_deepest_dependency():
    deps = {"a": [], "b": ["a"], "c": ["a", "b"]}
    assert layers(deps) == [["a"], ["b"], ["c"]]


def test_duplicate_dependency_is_harmless():
    assert layers({"a": [], "b": ["a", "a"]}) == [["a"], ["b"]]


def test_unknown_dependency_raises():
    with pytest.raises(UnknownDependencyError, match="'b' depends on unknown node 'ghost'"):
        layers({"a": [], "b": ["ghost"]})


def test_unknown_dependency_is_a_value_error():
    with pytest.raises(ValueError):
        layers({"b": ["ghost"]})


def test_cycle_raises_with_cycle_path():
    with pytest.raises(CycleError) as exc:
        layers({"start": [], "a": ["start", "c"], "b": ["a"], "c": ["b"]})
    cycle = exc.value.cycle
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"}
    assert "start" not in cycle
    assert " -> ".join(cycle) in str(exc.value)


def test_self_dependency_is_a_cycle():
    with pytest.raises(CycleError) as exc:
        layers({"a": ["a"]})
    assert exc.value.cycle == ["a", "a"]


def test_large_chain_does_not_recurse():
    n = 5000
    deps = {f"n{i}": ([f"n{i - 1}"] if i else []) for i in range(n)}
    result = layers(deps)
    assert len(result) == n and result[-1] == [f"n{n - 1}"]


# --- find_cycle ------------------------------------------------------------------------


def test_find_cycle_none_for_dag():
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) is None


def test_find_cycle_follows_dependency_edges():
    assert find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]


def test_find_cycle_ignores_unknown_ids():
    assert find_cycle({"a": ["ghost"]}) is None


def test_find_cycle_on_deep_graph():
    n = 5000
    deps = {f"n{i}": [f"n{(i + 1) % n}"] for i in range(n)}
    cycle = find_cycle(deps)
    assert cycle is not None and len(cycle) == n + 1


# --- trigger_decision ---------------------------------------------------------------------


def test_terminal_statuses():
    assert set(TERMINAL) == {"completed", "failed", "skipped", "cancelled"}


@pytest.mark.parametrize(
    "rule", ["all_success", "one_success", "none_failed_min_one_success", "all_done"]
)
def test_no_deps_always_runs(rule):
    assert trigger_decision(rule, []) == "run"


@pytest.mark.parametrize(
    "rule", ["all_success", "one_success", "none_failed_min_one_success", "all_done"]
)
@pytest.mark.parametrize("pending", ["pending", "running", "paused", "waiting_approval"])
def test_any_non_terminal_dep_waits(rule, pending):
    assert trigger_decision(rule, ["completed", pending]) == "wait"


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["completed", "completed"], "run"),
        (["completed", "skipped"], "skip"),
        (["completed", "failed"], "skip"),
        (["cancelled"], "skip"),
    ],
)
def test_all_success(statuses, expected):
    assert trigger_decision("all_success", statuses) == expected


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["failed", "completed"], "run"),
        (["skipped", "completed"], "run"),
        (["failed", "skipped"], "skip"),
        (["cancelled"], "skip"),
    ],
)
def test_one_success(statuses, expected):
    assert trigger_decision("one_success", statuses) == expected


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        (["completed", "skipped"], "run"),
        (["completed"], "run"),
        (["skipped", "skipped"], "skip"),
        (["completed", "failed"], "skip"),
        (["completed", "cancelled"], "skip"),
    ],
)
def test_none_failed_min_one_success(statuses, expected):
    assert trigger_decision("none_failed_min_one_success", statuses) == expected


@pytest.mark.parametrize(
    "statuses", [["failed"], ["skipped", "cancelled"], ["completed", "failed", "skipped"]]
)
def test_all_done_runs_once_everything_finished(statuses):
    assert trigger_decision("all_done", statuses) == "run"


def test_skipped_propagates_through_all_success_chain():
    # a skipped (false when:) -> b skipped -> c skipped
    statuses = {"a": "skipped"}
    statuses["b"] = "skipped" if trigger_decision("all_success", [statuses["a"]]) == "skip" else "?"
    assert trigger_decision("all_success", [statuses["b"]]) == "skip"


def test_empty_rule_defaults_to_all_success():
    assert trigger_decision("", ["completed", "skipped"]) == "skip"


def test_unknown_rule_raises():
    with pytest.raises(ValueError, match="unknown trigger_rule 'always'"):
        trigger_decision("always", ["completed"])


# --- find_cycles (every ring, for validation messages) -------------------------------------


def test_find_cycles_reports_each_ring_once_starting_at_its_first_declared_node():
    deps = {"a": ["b"], "b": ["a"], "c": ["d"], "d": ["e"], "e": ["c"], "f": []}
    assert find_cycles(deps, list(deps)) == [["a", "b"], ["c", "d", "e"]]


def test_find_cycles_stops_at_the_limit():
    deps = {f"n{i}": [f"m{i}"] for i in range(50)} | {f"m{i}": [f"n{i}"] for i in range(50)}
    assert len(find_cycles(deps, list(deps), limit=3)) == 3


def test_spec_layers_and_engine_layers_are_one_implementation():
    from recipes.loader import load_recipe

    source = (
        "name: x\nprovider: demo\nnodes:\n"
        "  - {id: z, bash: 'true'}\n  - {id: a, bash: 'true'}\n"
        "  - {id: c, bash: 'true', depends_on: [z]}\n  - {id: b, bash: 'true', depends_on: [a]}\n"
    )
    spec = load_recipe(source).spec
    assert (
        spec.layers()
        == layers({n.id: n.depends_on for n in spec.nodes})
        == [
            ["z", "a"],
            ["c", "b"],
        ]
    )
