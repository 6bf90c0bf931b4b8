"""What an unexpected error is called where people read it: its kind in plain words, never
a path or a message (recipe problems keep server paths out with
recipes.server_paths.without_server_paths)."""

from __future__ import annotations

# What an unexpected exception is called on a page: its kind in plain words. The class
# name, the message (which may quote paths, queries or a server's answer) and the
# traceback go to the log.
PLAIN_CAUSES: list[tuple[type[BaseException], str]] = [
    (RecursionError, "the input nests too deeply"),
    (MemoryError, "the worker ran out of memory"),
    (TimeoutError, "an operation timed out"),
    (UnicodeError, "text that is not valid UTF-8"),
    (PermissionError, "permission denied"),
]


def plain_cause(exc: BaseException) -> str:
    """A viewer-safe description of an unexpected error: an OS error's reason without the
    file name, else what kind of failure it was; never the class name or a path."""
    for kind, words in PLAIN_CAUSES:
        if isinstance(exc, kind):
            return words
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror[:1].lower() + exc.strerror[1:]
    return "an unexpected error in the engine"
