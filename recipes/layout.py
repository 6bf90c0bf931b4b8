"""The folder layout of a repository that keeps its workflows in `.archon/`.

    <repo>/.archon/workflows/flat.yaml              a shared ("legacy") workflow
    <repo>/.archon/workflows/group/x.yaml           grouped one level deep, still shared
    <repo>/.archon/workflows/<pack>/<wf>/wf.yaml    a packaged workflow: its own commands/
                                                    and scripts/ beside it, nothing else
    <repo>/.archon/commands/, commands/defaults/    shared command files
    <repo>/.archon/scripts/, scripts/<group>/       shared named scripts

Pure path logic: which folder holds what, and in which order files are looked up. The
settings (which folders are projects, the user folder) live in recipes.sources.
"""

from __future__ import annotations

from pathlib import Path

ARCHON = ".archon"
WORKFLOWS = "workflows"
# Folders inside a workflow tree that hold a workflow's resources, never workflows.
RESOURCE_FOLDERS = frozenset({"commands", "scripts"})
RECIPE_SUFFIXES = (".yaml", ".yml")


def archon_dir_of_project(project: Path) -> Path | None:
    """The `.archon` folder of a LOOP_RECIPE_DIRS entry: the entry may be a repository root
    (it has `.archon/workflows`) or that `.archon/workflows` folder itself."""
    if (project / ARCHON / WORKFLOWS).is_dir():
        return project / ARCHON
    if project.name == WORKFLOWS and project.parent.name == ARCHON:
        return project.parent
    return None


def workflow_folder(project: Path) -> Path:
    """Where a project's recipes are: its `.archon/workflows`, or the folder itself."""
    archon = archon_dir_of_project(project)
    return archon / WORKFLOWS if archon is not None else project


def archon_dir_of_file(path: Path) -> Path | None:
    """The `.archon` folder a recipe file sits under (`.archon/workflows/...`), if any."""
    parts = path.parts
    for i in range(len(parts) - 2, 0, -1):
        if parts[i] == WORKFLOWS and parts[i - 1] == ARCHON:
            return Path(*parts[:i])
    return None


def package_dir(path: Path) -> Path | None:
    """The package folder of a packaged workflow (`workflows/<pack>/<wf>/file.yaml`)."""
    archon = archon_dir_of_file(path)
    if archon is None:
        return None
    relative = path.relative_to(archon / WORKFLOWS)
    return path.parent if len(relative.parts) == 3 else None


def with_subfolders(folder: Path) -> list[Path]:
    """The folder, then each folder directly inside it, by name (`commands/defaults/`)."""
    found = [folder]
    try:
        found += sorted(p for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        pass
    return found


def recipe_files(folder: Path) -> list[Path]:
    """YAML recipes in `folder` and its subfolders (not in commands/ or scripts/ folders, not
    in hidden ones), shallowest first; Python recipes only at the top (a subfolder's `.py`
    files are helpers or scripts)."""
    if not folder.is_dir():
        return []
    found: list[Path] = []
    for path in folder.rglob("*"):
        relative = path.relative_to(folder)
        folders = relative.parts[:-1]
        if any(p.startswith(".") or p in RESOURCE_FOLDERS for p in folders):
            continue
        if path.name.startswith(("_", ".")) or not path.is_file():
            continue
        if path.suffix in RECIPE_SUFFIXES or (path.suffix == ".py" and not folders):
            found.append(path)
    return sorted(found, key=lambda p: (len(p.relative_to(folder).parts), str(p)))
