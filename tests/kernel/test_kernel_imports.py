"""The kernel and the catalogue import no loop kind, the kinds sit side by side under
`loops/`, and no import cycle spans two apps (issues 24 and 35).

Read statically (tests/import_graph.py): every import counts, a function-level one too.
`notifications` is not a kind, but the kernel does not import it either: it listens to
`runs.signals`, plugs its sweep pass and metrics in through `runs.kinds`, and its task is
sent by its Celery name.
`python -m tests.import_graph` prints what the second test finds, edge by edge.
"""

from __future__ import annotations

import pytest

from tests import import_graph
from tests.import_graph import app_of, build, cross_app_cycles, imports_of

# What runs/ must not import: the kinds, and the app that listens to the kernel's signals.
NOT_FOR_THE_KERNEL = ("loops", "notifications", "triggers")
# The kinds' common parent folder: each package right under it is one kind's app.
KINDS_PARENT = "loops"


@pytest.fixture(scope="module")
def graph():
    return build()


def test_the_kernel_imports_no_kind(graph):
    offenders = imports_of(graph, "runs", NOT_FOR_THE_KERNEL)
    assert not offenders, "runs/ imports a kind (or notifications):\n" + "\n".join(offenders)


def test_the_catalogue_imports_no_kind(graph):
    """recipes/ (Recipe, versions, sources, sync, editing, admin) asks runs.kinds to read a
    source. Its bundled recipe files are recipes, not the catalogue's code: a Python recipe
    imports its kind's `LoopWorkflow` as any recipe folder's would."""
    offenders = [
        line
        for line in imports_of(graph, "recipes", (KINDS_PARENT,))
        if not line.startswith("recipes.builtin")
    ]
    assert not offenders, "the catalogue imports a kind:\n" + "\n".join(offenders)


def test_every_kind_is_an_app_side_by_side_under_one_folder():
    from django.apps import apps

    from runs import kinds

    registered = kinds.all_kinds()
    assert {kind.name for kind in registered} >= {"workflow", "planeai", "python", "driven"}
    for kind in registered:
        app = apps.get_containing_app_config(type(kind).__module__)
        assert app is not None and app.name.rpartition(".")[0] == KINDS_PARENT, (
            f"{kind.name} is registered from {type(kind).__module__}"
        )
    kind_apps = {a.name for a in apps.get_app_configs() if a.name.startswith(KINDS_PARENT)}
    assert kind_apps == {
        apps.get_containing_app_config(type(k).__module__).name for k in registered
    }


def test_no_import_cycle_spans_two_apps(graph):
    cycles = cross_app_cycles(graph)
    report = [
        f"{len(component)} modules across {sorted({app_of(m) for m in component})}; "
        "the imports from one app to another inside the cycle:\n  " + "\n  ".join(edges)
        for component, edges in cycles
    ]
    assert not cycles, "\n".join(report)


# The checker itself, on a small tree of its own.

PROJECT = {
    "alpha/__init__.py": "",
    "alpha/core.py": "from beta import tools\n",
    "alpha/later.py": "def f():\n    from gamma.deep import thing\n",
    "alpha/by_name.py": "import importlib\nimportlib.import_module('gamma.deep')\n",
    "beta/__init__.py": "",
    "beta/tools.py": "from alpha import core\nfrom . import helpers\n",
    "beta/helpers.py": "X = 1\n",
    "gamma/__init__.py": "from .deep import thing\n",
    "gamma/deep.py": "thing = 1\n",
    "gamma/migrations/0001_initial.py": "from alpha import core\n",
    "gamma/templates.py": "from gamma import deep\n",  # a module, though named like a folder
    "beta/templates/page.py": "from alpha import core\n",  # a folder of templates: not code
}


@pytest.fixture
def toy_project(tmp_path):
    for name, text in PROJECT.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return build(tmp_path, ("alpha", "beta", "gamma"))


def test_the_checker_reads_every_kind_of_import(toy_project):
    assert toy_project["alpha.core"] == {"beta.tools"}  # `from x import module`
    assert toy_project["alpha.later"] == {"gamma.deep"}  # inside a function
    assert toy_project["alpha.by_name"] == {"gamma.deep"}  # importlib, by a literal name
    assert toy_project["beta.tools"] == {"alpha.core", "beta.helpers"}  # `from . import module`
    assert toy_project["gamma"] == {"gamma.deep"}
    assert toy_project["gamma.templates"] == {"gamma.deep"}
    assert "gamma.migrations.0001_initial" not in toy_project
    assert "beta.templates.page" not in toy_project


def test_the_checker_finds_a_cycle_across_apps(toy_project, monkeypatch):
    monkeypatch.setattr(import_graph, "NESTED_APPS", ())
    ((component, edges),) = cross_app_cycles(toy_project)
    assert component == ["alpha.core", "beta.tools"]
    assert edges == ["alpha.core -> beta.tools", "beta.tools -> alpha.core"]
    assert imports_of(toy_project, "alpha", ["gamma"]) == [
        "alpha.by_name -> gamma.deep",
        "alpha.later -> gamma.deep",
    ]
