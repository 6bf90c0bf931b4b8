"""Where recipes and command files come from, in order of precedence."""

from pathlib import Path

from django.conf import settings

BUILTIN_DIR = Path(__file__).resolve().parent / "builtin"


def project_dirs() -> list[Path]:
    return [Path(p).expanduser() for p in settings.LOOP_RECIPE_DIRS]


def planeai_dirs() -> list[Path]:
    """`.planeai/loops/` of each repository step-machine runs work in (LOOP_REPOSITORIES):
    project recipes of the highest precedence, as planeai places them."""
    return [Path(p).expanduser() / ".planeai" / "loops" for p in settings.LOOP_REPOSITORIES]


def user_dir() -> Path:
    return Path(settings.LOOP_USER_RECIPE_DIR).expanduser()


def commands_dirs(source_path: str = "") -> list[Path]:
    """A recipe's own `commands/` folder first, then each project's, the user's, the bundled."""
    dirs: list[Path] = []
    if source_path:
        dirs.append(Path(source_path).parent / "commands")
    for project in project_dirs():
        dirs += [project / "commands", project.parent / "commands"]
    dirs += [user_dir() / "commands", BUILTIN_DIR / "commands"]
    unique = []
    for folder in dirs:
        if folder not in unique:
            unique.append(folder)
    return unique
