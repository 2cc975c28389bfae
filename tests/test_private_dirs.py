"""simdb.util.private_dirs: the one check of a directory only this user can reach.

It replaced four copies (dedup journals, the warm process's socket, jieba's cache, the embedded
home's creation), each a little different; these tests hold the strictest of them for all.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from permissions_support import mode_of

from simdb.util.private_dirs import make_private_dirs, open_private_dir, private_cache_dir


def test_created_with_every_missing_parent_private(tmp_path: Path, loose_umask):
    target = tmp_path / "a" / "b" / "c"
    fd = open_private_dir(target, create=True)
    os.close(fd)
    assert [mode_of(p) for p in (tmp_path / "a", tmp_path / "a" / "b", target)] == [0o700] * 3
    assert make_private_dirs(target) == []  # nothing left to create
    assert make_private_dirs(tmp_path / "a" / "d") == [tmp_path / "a" / "d"]


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o711, 0o705, 0o720])
def test_a_directory_anyone_else_may_reach_is_refused_and_left_as_it_is(tmp_path: Path, mode):
    place = tmp_path / "place"
    place.mkdir()
    os.chmod(place, mode)
    for create in (False, True):
        with pytest.raises(PermissionError, match=f"mode {mode:o}"):
            open_private_dir(place, create=create)
    assert mode_of(place) == mode


def test_a_link_is_never_followed(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(OSError) as info:
        open_private_dir(link, create=True)
    assert info.value.errno in (errno.ELOOP, errno.ENOTDIR)
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        with pytest.raises(OSError):
            open_private_dir("link", fd)
    finally:
        os.close(fd)


def test_a_file_in_its_place_is_refused(tmp_path: Path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(OSError):
        open_private_dir(tmp_path / "file", create=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_directory_of_another_user_is_refused(tmp_path: Path):
    place = tmp_path / "place"
    place.mkdir(mode=0o700)
    os.chown(place, 65534, 65534)
    with pytest.raises(PermissionError, match="uid 65534"):
        open_private_dir(place)


def test_inside_a_directory_only_that_name_is_created(tmp_path: Path):
    fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.close(open_private_dir("inner", fd, create=True))
        with pytest.raises(FileNotFoundError):
            open_private_dir("missing", fd)
    finally:
        os.close(fd)
    assert mode_of(tmp_path / "inner") == 0o700


def test_the_cache_directory(tmp_path: Path, monkeypatch, loose_umask):
    cache_home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache_home))
    assert private_cache_dir("thing") == str(cache_home / "simdb" / "thing")
    assert [mode_of(p) for p in (cache_home, cache_home / "simdb", cache_home / "simdb" / "thing")] == [0o700] * 3
    os.chmod(cache_home, 0o755)  # the cache home may be readable by others (~/.cache often is)
    assert private_cache_dir("thing") is not None
    os.chmod(cache_home / "simdb", 0o755)  # its simdb folder may not
    assert private_cache_dir("thing") is None
    os.chmod(cache_home / "simdb", 0o700)
    os.chmod(cache_home, 0o775)  # nor may anyone else write the cache home
    assert private_cache_dir("thing") is None


def test_a_linked_or_relative_cache_home_gives_no_cache(tmp_path: Path, monkeypatch):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "link"))
    assert private_cache_dir("thing") is None
    assert not (real / "simdb").exists()
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")  # ignored, as XDG says: ~/.cache
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    assert private_cache_dir("thing") == str(tmp_path / "home" / ".cache" / "simdb" / "thing")
