"""No module of the apps grows past 400 lines: split one along a seam before it does
(migrations aside: Django writes them)."""

from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
MOST_LINES = 400


def app_modules() -> list[Path]:
    folders = [Path(c.path) for c in apps.get_app_configs() if Path(c.path).parent == ROOT]
    return sorted(
        module
        for folder in folders
        for module in folder.rglob("*.py")
        if "migrations" not in module.relative_to(folder).parts
    )


def test_every_app_is_checked():
    checked = {module.relative_to(ROOT).parts[0] for module in app_modules()}
    assert {"console", "recipes", "runs", "loops", "notifications"} <= checked


def test_no_app_module_is_over_400_lines():
    long = {
        str(module.relative_to(ROOT)): lines
        for module in app_modules()
        if (lines := len(module.read_text().splitlines())) > MOST_LINES
    }
    assert not long, f"split these modules (lines each): {long}"
