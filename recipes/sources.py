"""Where recipes, command files, named scripts and included workflows come from, in order
of precedence. The folder rules of a repository's `.archon/` are in recipes.layout."""

from pathlib import Path

from django.conf import settings

from recipes import readers
from recipes.formats.repo_config import read_config
from recipes.formats.resources import Resources
from recipes.layout import (
    archon_dir_of_file,
    archon_dir_of_project,
    package_dir,
    recipe_files,
    with_subfolders,
    workflow_folder,
)

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def project_dirs() -> list[Path]:
    return [Path(p).expanduser() for p in settings.LOOP_RECIPE_DIRS]


def repository_roots(repositories: tuple = ()) -> list[Path]:
    """The repositories runs may work in, first one first: `repositories` (a run's own,
    given by the caller), the current one (the repository the command is run from), then
    LOOP_REPOSITORIES. A kind may keep recipes in them (LoopKind.repository_recipe_folders:
    a step machine's `.planeai/loops/`), of the highest precedence."""
    roots = [Path(p).expanduser().resolve() for p in repositories]
    here = current_repository()
    if here is not None:
        roots.append(here)
    roots += [Path(p).expanduser().resolve() for p in settings.LOOP_REPOSITORIES]
    return _unique(roots)


def repository_recipe_dirs(repositories: tuple = ()) -> list[Path]:
    """Each kind's recipe folders in those repositories, first one first."""
    roots = repository_roots(repositories)
    return _unique(
        [folder for kind in readers.readers() for folder in kind.repository_recipe_folders(roots)]
    )


def kinds_user_dirs() -> list[Path]:
    """The user folders the kinds' own designs keep recipes in (a step machine's)."""
    return _unique([folder for kind in readers.readers() for folder in kind.user_recipe_folders()])


def current_repository() -> Path | None:
    """The top of the git repository the process runs in, if it runs in one: the nearest
    folder holding `.git` (a folder, or a worktree's file). Found by looking, not by
    running git: the catalogue starts no process (and imports nothing of the kernel's)."""
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return None


def user_dir() -> Path:
    return Path(settings.LOOP_USER_RECIPE_DIR).expanduser()


def _unique(dirs: list[Path]) -> list[Path]:
    unique: list[Path] = []
    for folder in dirs:
        if folder not in unique:
            unique.append(folder)
    return unique


def commands_dirs(source_path: str = "") -> list[Path]:
    """Where `command: NAME` is looked for, first folder first.

    A packaged workflow (`.archon/workflows/<pack>/<wf>/`) uses only its own `commands/`.
    Any other workflow of a repository uses the repository's `.archon/commands/` and the
    folders directly inside it (`defaults/`, ...), then the user's, then the bundled ones.
    A recipe elsewhere uses its own `commands/` folder, each project's, the user's, the
    bundled ones."""
    path = Path(source_path) if source_path else None
    user = with_subfolders(user_dir() / "commands")
    bundled = [BUILTIN_DIR / "commands"]
    if path is not None:
        package = package_dir(path)
        if package is not None:
            return [package / "commands"]
        archon = archon_dir_of_file(path)
        if archon is not None:
            return _unique([*with_subfolders(archon / "commands"), *user, *bundled])
    dirs: list[Path] = [path.parent / "commands"] if path is not None else []
    for project in project_dirs():
        archon = archon_dir_of_project(project)
        if archon is not None:
            dirs += with_subfolders(archon / "commands")
        else:
            dirs += [project / "commands", project.parent / "commands"]
    return _unique([*dirs, *user, *bundled])


def scripts_dirs(source_path: str = "") -> list[Path]:
    """Where a named `script: NAME` is looked for, like commands: a packaged workflow's own
    `scripts/`; a repository's `.archon/scripts/` (one subfolder deep), then the user's."""
    path = Path(source_path) if source_path else None
    user = with_subfolders(user_dir() / "scripts")
    if path is not None:
        package = package_dir(path)
        if package is not None:
            return [package / "scripts"]
        archon = archon_dir_of_file(path)
        if archon is not None:
            return _unique([*with_subfolders(archon / "scripts"), *user])
    dirs: list[Path] = [path.parent / "scripts"] if path is not None else []
    for project in project_dirs():
        archon = archon_dir_of_project(project)
        dirs += with_subfolders(archon / "scripts") if archon else [project / "scripts"]
    return _unique([*dirs, *user])


def workflow_dirs(source_path: str = "") -> list[Path]:
    """Where `include: NAME` is looked for: the recipe's own workflow tree first (its
    repository's `.archon/workflows`), then every project folder, the user's, the bundled."""
    dirs: list[Path] = []
    if source_path:
        path = Path(source_path)
        archon = archon_dir_of_file(path)
        dirs.append(archon / "workflows" if archon is not None else path.parent)
    dirs += [workflow_folder(p) for p in project_dirs()]
    return _unique([*dirs, user_dir(), BUILTIN_DIR])


def find_workflow(name: str, source_path: str = "") -> Path | None:
    """The first YAML file named `NAME.yaml` (or `.yml`) in the folders above."""
    for folder in workflow_dirs(source_path):
        for path in recipe_files(folder):
            if path.stem == name and path.suffix in (".yaml", ".yml"):
                return path
    return None


def resources_for(source_path: str = "") -> Resources:
    """What a recipe file may refer to, for the loader (which knows no settings)."""
    archon = archon_dir_of_file(Path(source_path)) if source_path else None
    aliases, assistant, problem = read_config(archon)
    return Resources(
        model_aliases=aliases,
        default_assistant=assistant,
        config_problem=problem,
        source_path=source_path,
        commands_dirs=tuple(commands_dirs(source_path)),
        scripts_dirs=tuple(scripts_dirs(source_path)),
        workflow_dirs=tuple(workflow_dirs(source_path)),
        find_workflow=lambda name: find_workflow(name, source_path),
        for_file=resources_for,
    )
