"""runs/sandbox/files.py: how the console reads and writes files in places an agent can
write. A link anywhere below the trusted folder, a FIFO, a device, a folder or a name that
leaves the folder is refused (a FIFO without blocking); a read stops at its cap."""

from __future__ import annotations

import os
import threading

import pytest

from runs.sandbox import files


def _soon(call, seconds: float = 5.0):
    """`call()`'s result or exception, failing if it takes longer than `seconds` (a FIFO
    that blocked the open would hang the test otherwise)."""
    outcome: dict = {}

    def run():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"{call} blocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


@pytest.fixture
def tree(tmp_path):
    """A workspace with a file, a folder, and a secret outside it."""
    work = tmp_path / "work"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "notes.md").write_text("notes\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRET-CANARY\n")
    return work, secret


def test_a_regular_file_is_read_whole_or_to_its_cap(tree):
    work, _ = tree
    found = files.read_file(work, "docs/notes.md", limit=100)
    assert (found.text(), found.size, found.cut) == ("notes\n", 6, False)
    start = files.read_file(work, "./docs/notes.md", limit=3)
    end = files.read_file(work, "docs/notes.md", limit=3, end=True)
    assert (start.data, start.cut, end.data, end.cut) == (b"not", True, b"es\n", True)


def test_a_cut_never_leaves_half_a_character(tmp_path):
    (tmp_path / "t").write_text("aé" * 10)  # 30 bytes
    assert files.read_file(tmp_path, "t", limit=5).text() == "aéa"  # and half an é
    assert files.read_file(tmp_path, "t", limit=4, end=True).text() == "aé"  # after half


def test_a_huge_sparse_file_is_read_to_its_cap_only(tmp_path):
    with open(tmp_path / "big", "wb") as big:
        big.truncate(50 * 1024**3)  # 50 GB of nothing, in no time
    found = _soon(lambda: files.read_file(tmp_path, "big", limit=1024, end=True))
    assert len(found.data) == 1024 and found.size == 50 * 1024**3 and found.cut


def test_a_link_as_the_file_is_refused_even_inside_the_tree(tree):
    work, secret = tree
    (work / "secret.md").symlink_to(secret)
    (work / "inside.md").symlink_to(work / "docs" / "notes.md")
    for name in ("secret.md", "inside.md"):
        with pytest.raises(files.Refused, match=f"{name} is a symbolic link"):
            files.read_file(work, name, limit=100)


def test_a_link_in_the_middle_of_the_path_is_refused(tree):
    work, secret = tree
    (work / "up").symlink_to(secret.parent)
    (work / "also-docs").symlink_to(work / "docs")
    with pytest.raises(files.Refused, match=r"up \(in up/secret.txt\) is a symbolic link"):
        files.read_file(work, "up/secret.txt", limit=100)
    with pytest.raises(files.Refused, match="is a symbolic link, not a folder"):
        files.read_file(work, "also-docs/notes.md", limit=100)


def test_a_fifo_is_refused_without_blocking(tree):
    work, _ = tree
    os.mkfifo(work / "notes.md")
    with pytest.raises(files.Refused, match=r"notes.md is a FIFO \(named pipe\)"):
        _soon(lambda: files.read_file(work, "notes.md", limit=100))
    with pytest.raises(files.Refused, match="FIFO"):
        _soon(lambda: files.create_file(work, "notes.md"))


def test_a_device_a_folder_and_a_socket_are_refused(tree, tmp_path):
    work, _ = tree
    with pytest.raises(files.Refused, match="null is a device"):
        files.read_file("/dev", "null", limit=100)  # the folder is trusted; its entry is not
    with pytest.raises(files.Refused, match="docs is a folder"):
        files.read_file(work, "docs", limit=100)
    import socket

    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(work / "s"))
    try:
        with pytest.raises(files.Refused, match="s is a socket"):
            files.read_file(work, "s", limit=100)
    finally:
        listener.close()


def test_a_name_that_leaves_the_folder_or_is_missing(tree):
    work, secret = tree
    for name in ("../secret.txt", "docs/../../secret.txt", str(secret)):
        with pytest.raises(files.Outside):
            files.read_file(work, name, limit=100)
    with pytest.raises(FileNotFoundError):
        files.read_file(work, "docs/missing.md", limit=100)
    with pytest.raises(FileNotFoundError):
        files.read_file(work, "missing/notes.md", limit=100)


def test_a_write_never_follows_a_link_and_empties_only_a_regular_file(tree):
    work, secret = tree
    (work / "log").symlink_to(secret)
    with pytest.raises(files.Refused, match="log is a symbolic link"):
        files.create_file(work, "log")
    (work / "via").symlink_to(secret.parent)
    with pytest.raises(files.Refused, match="symbolic link"):
        files.write_file(work, "via/secret.txt", b"overwritten")
    assert secret.read_text() == "SECRET-CANARY\n"
    files.write_file(work, "docs/notes.md", b"new")
    assert (work / "docs" / "notes.md").read_text() == "new"
    with files.create_file(work, "fresh.log") as fresh:
        fresh.write(b"written and read back")
        assert files.read_open(fresh, limit=4, end=True).data == b"back"
    assert (work / "fresh.log").stat().st_mode & 0o777 == 0o600
