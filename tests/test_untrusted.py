"""The link-refusing copies (pytest_agent_eval/harness/untrusted.py) on their own: every function against a link, a
file where a folder was walked, a FIFO, a missing entry, and the descriptors each leaves open (none). The escape
tests (tests/test_escape.py) hold them against a real agent's planted links; these pin each branch
(``python bench/mutation.py harness/untrusted.py``, docs/benchmarks.md, "Mutation testing")."""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePath

import pytest

from pytest_agent_eval.harness.untrusted import (
    UntrustedFile,
    copy_file,
    copy_tree,
    open_dir,
    open_file,
    read_bytes,
    replace_file,
    replace_files,
)


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A folder as an agent leaves it: files, a subfolder, a link to a host file and to a host folder, a FIFO."""
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "secret").write_text("host secret")
    root = tmp_path / "home"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "c.txt").write_text("deep")
    (root / "top.txt").write_text("0123456789")
    (root / "file-link").symlink_to(tmp_path / "host" / "secret")
    (root / "dir-link").symlink_to(tmp_path / "host")
    os.mkfifo(root / "fifo")
    return root


@pytest.mark.parametrize("relative", ["", "/etc/passwd", "a/../top.txt", ".."])
def test_a_path_that_is_not_inside_its_root_is_refused(home, relative):
    with pytest.raises(ValueError, match="not a path inside its root"):
        open_file(home, relative)


def test_open_dir_walks_folders_and_refuses_a_link_or_a_file_on_the_way(home):
    before = open_fds()
    fd = open_dir(home)
    assert sorted(os.listdir(fd)) == ["a", "dir-link", "fifo", "file-link", "top.txt"]
    os.close(fd)
    fd = open_dir(home, PurePath("."))
    os.close(fd)
    fd = open_dir(home, "a/b")
    assert os.listdir(fd) == ["c.txt"]
    os.close(fd)
    with pytest.raises(UntrustedFile, match=r"home/dir-link: a link on the way"):
        open_dir(home, "dir-link")
    with pytest.raises(UntrustedFile, match=r"home/top.txt/x: a link on the way"):
        open_dir(home, "top.txt/x")  # a file where a folder was walked (ENOTDIR)
    with pytest.raises(FileNotFoundError) as missing:
        open_dir(home, "a/missing")
    assert not isinstance(missing.value, UntrustedFile)  # nothing planted: the plain error, not a refusal
    assert open_fds() == before  # every descriptor closed, refused or not


def test_open_file_reads_a_regular_file_only(home):
    before = open_fds()
    for relative in ("top.txt", "a/b/c.txt"):
        fd = open_file(home, relative)
        os.close(fd)
    with pytest.raises(UntrustedFile, match="file-link: a link on the way"):
        open_file(home, "file-link")
    with pytest.raises(UntrustedFile, match="home/dir-link: a link on the way"):
        open_file(home, "dir-link/secret")
    with pytest.raises(UntrustedFile, match="fifo: not a regular file"):
        open_file(home, "fifo")  # opened without waiting for a writer, then refused
    with pytest.raises(UntrustedFile, match="home/a: not a regular file"):
        open_file(home, "a")
    with pytest.raises(FileNotFoundError):
        open_file(home, "nothing.txt")
    assert open_fds() == before


def test_read_bytes_from_an_offset(home):
    assert read_bytes(home, "top.txt") == b"0123456789"
    assert read_bytes(home, "top.txt", 4) == b"456789"
    assert read_bytes(home, "a/b/c.txt") == b"deep"


def test_copy_file_replaces_its_destination_whole(home, tmp_path):
    big = os.urandom(3 * (1 << 20) + 17)  # more than one chunk
    (home / "big.bin").write_bytes(big)
    dest = tmp_path / "copy.bin"
    dest.write_bytes(b"x" * (5 << 20))  # longer than what replaces it
    copy_file(home, "big.bin", dest)
    assert dest.read_bytes() == big
    with pytest.raises(UntrustedFile):
        copy_file(home, "file-link", tmp_path / "leak")
    assert not (tmp_path / "leak").exists() or (tmp_path / "leak").read_bytes() == b""


def test_copy_tree_copies_folders_and_files_and_refuses_any_link_or_special_file(home, tmp_path):
    before = open_fds()
    copy_tree(home, "a", tmp_path / "copy")
    assert (tmp_path / "copy" / "b" / "c.txt").read_text() == "deep"
    assert [p.relative_to(tmp_path / "copy").as_posix() for p in sorted((tmp_path / "copy").rglob("*"))] == [
        "b",
        "b/c.txt",
    ]
    with pytest.raises(UntrustedFile, match=r"home/dir-link: a link; the agent's folders are copied only"):
        copy_tree(home, ".", tmp_path / "whole")
    (home / "dir-link").unlink()
    (home / "file-link").unlink()
    with pytest.raises(UntrustedFile, match=r"home/fifo: not a regular file; the agent's folders"):
        copy_tree(home, ".", tmp_path / "whole2")
    (home / "fifo").unlink()
    (home / "a" / "b" / "link").symlink_to(tmp_path / "host" / "secret")
    with pytest.raises(UntrustedFile, match=r"home/a/b/link: a link"):
        copy_tree(home, ".", tmp_path / "whole3")  # found in a subfolder too
    with pytest.raises(FileExistsError):
        copy_tree(home, "a", tmp_path / "copy")  # the destination must not exist
    assert open_fds() == before


def swap_after_listing(monkeypatch, listed: str, swap) -> None:
    """``swap()`` runs once a folder holding ``listed`` has been listed (each entry's kind read), before it is
    copied: the agent racing the copy."""
    real_scandir = os.scandir

    def swapping_scandir(fd):
        entries = list(real_scandir(fd))
        for entry in entries:
            entry.stat(follow_symlinks=False)
        if any(e.name == listed for e in entries):
            swap()
        return _Entries(entries)

    monkeypatch.setattr(os, "scandir", swapping_scandir)


class _Entries(list):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_copy_tree_refuses_a_subfolder_swapped_for_a_link_while_copying(home, tmp_path, monkeypatch):
    """A folder listed as a folder but a link by the time it is opened (the agent raced the copy) is refused."""

    def swap():
        (home / "a" / "b").rename(home / "a" / "b-moved")
        (home / "a" / "b").symlink_to(tmp_path / "host")

    swap_after_listing(monkeypatch, "b", swap)
    with pytest.raises(UntrustedFile, match=r"home/a/b: a link on the way"):
        copy_tree(home, "a", tmp_path / "copy")


def test_replace_file_writes_a_new_file_over_a_link_never_through_it(home, tmp_path):
    before = open_fds()
    replace_file(home, "file-link", b"mine")
    assert (tmp_path / "host" / "secret").read_text() == "host secret"  # the link's target untouched
    assert not (home / "file-link").is_symlink() and (home / "file-link").read_bytes() == b"mine"
    assert stat.S_IMODE((home / "file-link").stat().st_mode) == 0o600
    replace_file(home, "a/b/c.txt", b"new", mode=0o640)
    assert (home / "a" / "b" / "c.txt").read_bytes() == b"new"
    assert stat.S_IMODE((home / "a" / "b" / "c.txt").stat().st_mode) == 0o640 & ~_umask()
    assert sorted(os.listdir(home / "a" / "b")) == ["c.txt"]  # no temporary left behind
    with pytest.raises(UntrustedFile, match="dir-link: a link on the way"):
        replace_file(home, "dir-link/secret", b"x")
    assert (tmp_path / "host" / "secret").read_text() == "host secret"
    assert open_fds() == before


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_replace_files_makes_the_folders_and_writes_each_as_utf8(home):
    replace_files(home, home / "cfg", {"settings.json": "{}", "sub/deep/agents.md": "héllo"})
    assert (home / "cfg" / "settings.json").read_text() == "{}"
    assert (home / "cfg" / "sub" / "deep" / "agents.md").read_bytes() == "héllo".encode()


def test_replace_file_never_writes_through_a_link_planted_at_its_temporary_name(home, tmp_path):
    """The temporary is created exclusively: a link the agent planted at its name fails the write."""
    (home / f".top.txt.agent-eval-{os.getpid()}").symlink_to(tmp_path / "host" / "secret")
    with pytest.raises(FileExistsError):
        replace_file(home, "top.txt", b"mine")
    assert (tmp_path / "host" / "secret").read_text() == "host secret"
    assert (home / "top.txt").read_text() == "0123456789"


def test_replace_files_writes_again_into_folders_that_exist(home):
    for text in ("one", "two"):
        replace_files(home, home / "cfg", {"a.json": text, "b.json": text})
    assert (home / "cfg" / "b.json").read_text() == "two"


def test_copy_tree_names_a_file_swapped_for_a_link_while_copying(home, tmp_path, monkeypatch):
    def swap():
        (home / "a" / "b" / "c.txt").unlink()
        (home / "a" / "b" / "c.txt").symlink_to(tmp_path / "host" / "secret")

    swap_after_listing(monkeypatch, "c.txt", swap)
    with pytest.raises(UntrustedFile, match=r"home/a/b/c\.txt: a link on the way"):
        copy_tree(home, "a", tmp_path / "copy")
