"""Files simdb reads and writes (issue 31, items 2, 8 and 9): links in named folders, private outputs.

Reading: a symbolic link inside a folder the user named is never followed out of it
(``notes2.txt -> /etc/shadow`` in a shared folder), FIFOs and devices are never read, and
each file skipped for that is named on stderr; a file the user names directly is read even
when it is a link (their choice, docs/security.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from cli_support import base_env, simdb_argv
from permissions_support import mode_of

from simdb.cli import build_parser
from simdb.cli.inputs import iter_records, walk
from simdb.dataset.records import read_records
from simdb.errors import InputError
from simdb.util.atomic_file import atomic_file
from simdb.util.confined_files import NotInsideError, check_directory, open_inside, read_confined

SECRET = "zebra quartz marmalade secret never to be indexed"
TEXT = "the quick brown fox jumps over the lazy dog while the cat sleeps in the warm afternoon sun"


@pytest.fixture
def share(tmp_path: Path) -> Path:
    """A folder another user could have filled: a file, links out and in, a FIFO."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text(SECRET, encoding="utf-8")
    share = tmp_path / "share"
    share.mkdir()
    (share / "a.txt").write_text(TEXT, encoding="utf-8")
    os.symlink(outside / "shadow", share / "notes2.txt")  # out, absolute
    os.symlink("../outside/shadow", share / "rel.txt")  # out, relative
    os.symlink("a.txt", share / "alias.txt")  # stays inside: read through its target
    os.symlink(outside, share / "sub")  # a directory out: not walked
    os.mkfifo(share / "pipe.txt")  # reading it would block forever
    return share


def _run(files, skipped):
    args = build_parser().parse_args(["add", "x", "--root", str(files[0].path.parent) if files else "."])
    return [(r.key, r.text) for r in iter_records(files, args, skipped)]


def test_walk_skips_and_names_links_out_of_the_folder_and_fifos(share: Path):
    skipped: list[dict] = []
    records = _run(walk([str(share)], "*", skipped), skipped)
    assert records == [("a.txt", TEXT), ("alias.txt", TEXT)]
    reasons = {Path(s["key"]).name: s["reason"] for s in skipped}
    assert set(reasons) == {"notes2.txt", "rel.txt", "sub", "pipe.txt"}  # sub: a directory out, not walked
    assert "outside" in reasons["notes2.txt"] and "notes2.txt" in reasons["notes2.txt"]
    assert "outside" in reasons["rel.txt"]
    assert "not a regular file" in reasons["pipe.txt"]
    assert all(SECRET not in t for _, t in records)


def test_walk_skips_and_names_a_directory_renamed_while_it_walks(tmp_path: Path, monkeypatch):
    """audit: a subdirectory renamed during ``simdb add DIR`` aborted the whole add (rglob raised)."""
    tree = tmp_path / "tree"
    for sub in ("a", "b", "c"):
        (tree / sub).mkdir(parents=True)
        (tree / sub / f"{sub}.txt").write_text(TEXT)
    listed = os.scandir

    def scandir(path):
        if Path(path) == tree / "b":  # renamed between its parent's listing and its own
            (tree / "b").rename(tmp_path / "b-moved")
        return listed(path)

    monkeypatch.setattr(os, "scandir", scandir)
    skipped: list[dict] = []
    files = walk([str(tree)], "*.txt", skipped)
    assert sorted(f.path.name for f in files) == ["a.txt", "c.txt"]
    assert [s["key"] for s in skipped] == [str(tree / "b")]
    assert "cannot read directory" in skipped[0]["reason"] and "No such file" in skipped[0]["reason"]


def test_walk_without_a_skip_list_says_so_on_stderr(share: Path, capsys):
    files = walk([str(share)], "*")
    assert sorted(f.path.name for f in files) == ["a.txt", "alias.txt"]
    lines = capsys.readouterr().err.splitlines()
    assert len([line for line in lines if "notes2.txt" in line and "outside" in line]) == 1


def test_a_link_named_explicitly_is_read(share: Path):
    """The user's own choice (docs/security.md): only links found inside a folder are refused."""
    skipped: list[dict] = []
    assert _run(walk([str(share / "notes2.txt")], "*", skipped), skipped) == [("notes2.txt", SECRET)]


def test_a_file_swapped_for_a_link_after_the_walk_is_not_read(share: Path, tmp_path: Path):
    """open_inside checks on the open file, not on an earlier look: no window between check and read."""
    (share / "docs").mkdir()
    (share / "docs" / "b.txt").write_text(TEXT + " b", encoding="utf-8")
    (share / "c.txt").write_text(TEXT + " c", encoding="utf-8")
    skipped: list[dict] = []
    files = [f for f in walk([str(share)], "*", skipped) if f.path.name in ("b.txt", "c.txt")]
    assert len(files) == 2
    # after the walk: a file replaced by a link out, a directory of the path replaced by one
    (share / "c.txt").unlink()
    os.symlink(tmp_path / "outside" / "shadow", share / "c.txt")
    (share / "docs" / "b.txt").unlink()
    (share / "docs").rmdir()
    (tmp_path / "outside" / "b.txt").symlink_to(tmp_path / "outside" / "shadow")
    os.symlink(tmp_path / "outside", share / "docs")
    later: list[dict] = []
    assert _run(files, later) == []
    assert len(later) == 2 and all("outside" in s["reason"] for s in later)


def test_open_inside_follows_no_link_even_where_realpath_saw_none(share: Path, monkeypatch):
    """The race itself: a link swapped in between open_inside's look (realpath) and its open."""
    root = check_directory(share)
    monkeypatch.setattr(os.path, "realpath", os.path.normpath)  # "looked" before the links appeared
    for path in ("notes2.txt", "sub/shadow"):
        with pytest.raises(NotInsideError, match="symbolic link appeared"):
            open_inside(root, path)


def test_open_inside_refuses_a_link_in_any_component(tmp_path: Path, share: Path):
    root = check_directory(share)
    fd = open_inside(root, "alias.txt")
    try:
        assert os.read(fd, 1000).decode() == TEXT
    finally:
        os.close(fd)
    for path in ("notes2.txt", "rel.txt", "sub/shadow", "../outside/shadow", str(tmp_path / "outside" / "shadow")):
        with pytest.raises(NotInsideError, match="outside"):
            open_inside(root, path)
        assert read_confined(root, path, 1000) is None
    with pytest.raises(NotInsideError, match="regular"):
        open_inside(root, "pipe.txt")


def test_dedup_reads_no_fifo_or_device(share: Path):
    with pytest.raises(InputError, match="not a regular file"):
        list(read_records([os.devnull], fmt="jsonl"))
    # a writer that ends after a while, so that a reader which does open the FIFO is not stuck for good
    writer = os.open(share / "pipe.txt", os.O_RDWR | os.O_NONBLOCK)
    os.write(writer, b'{"id": "1", "text": "from a pipe"}\n')
    lock = threading.Lock()
    open_fds = [writer]

    def close_writer():
        with lock:
            while open_fds:
                os.close(open_fds.pop())

    closer = threading.Timer(2.0, close_writer)
    closer.start()
    try:
        with pytest.raises(InputError, match="not a regular file"):
            list(read_records([str(share / "pipe.txt")], fmt="jsonl"))
    finally:
        closer.cancel()
        close_writer()


def test_cli_add_and_report_never_show_a_file_linked_from_a_shared_folder(share: Path, tmp_path: Path,
                                                                          database_url, collection_name):
    """The attack of issue 31, item 2: ``add --store-text`` of a folder, then ``report``."""
    env = base_env(SIMDB_DATABASE_URL=database_url)

    def simdb(*args):
        return subprocess.run(simdb_argv() + [str(a) for a in args] + ["-c", collection_name],
                              check=False, capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)

    p = simdb("add", "--store-text", share)
    assert p.returncode == 0, p.stderr
    named = [line for line in p.stderr.splitlines() if "skipped" in line]
    assert len(named) == 4 and any("notes2.txt" in line for line in named), p.stderr
    p = simdb("dups", "--json")
    assert p.returncode == 0, p.stderr
    keys = {k for c in json.loads(p.stdout) for k in c["keys"]}
    assert keys == {"share/a.txt", "share/alias.txt"}
    out = tmp_path / "r.html"
    p = simdb("report", "--output", out, "--texts-from", share)
    assert p.returncode == 0, p.stderr
    assert SECRET not in out.read_text(encoding="utf-8")
    p = simdb("check", share)
    assert "notes2.txt" in p.stderr and "outside" in p.stderr


# --------------------------------------------------------------------------- outputs are private data


def test_atomic_file_is_private_when_new_and_keeps_an_existing_mode(tmp_path: Path, loose_umask):
    out = tmp_path / "out.txt"
    with atomic_file(out, "w") as f:
        f.write("one")
    assert mode_of(out) == 0o600
    for mode in (0o644, 0o640, 0o600):
        out.chmod(mode)
        with atomic_file(out, "w") as f:
            f.write("again")
        assert mode_of(out) == mode and out.read_text() == "again"


def test_atomic_file_takes_no_mode_from_a_planted_file_or_a_link(tmp_path: Path, loose_umask):
    """audit: a 0666 file another user planted in a sticky folder, or a link to a 0644 file, made the
    output (or its temporary file, for a moment) readable by everyone."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    target = tmp_path / "elsewhere"
    target.write_text("theirs")
    target.chmod(0o644)
    (shared / "link.html").symlink_to(target)
    modes = []
    with atomic_file(shared / "link.html", "w") as f:
        f.write("report")
        (tmp,) = shared.glob(".link.html.*.partial")
        modes.append(mode_of(tmp))
    assert modes == [0o600] and mode_of(shared / "link.html") == 0o600 and not (shared / "link.html").is_symlink()
    assert target.read_text() == "theirs" and mode_of(target) == 0o644
    if os.geteuid() != 0:
        return  # chown to another uid needs root
    planted = shared / "out.html"
    planted.write_text("")
    os.chown(planted, 65534, 65534)
    planted.chmod(0o666)
    with atomic_file(planted, "w") as f:
        f.write("report")
    assert mode_of(planted) == 0o600 and planted.stat().st_uid == 0 and planted.read_text() == "report"


def test_atomic_file_never_chmods_or_renames_a_link_planted_at_its_temporary_name(tmp_path: Path, loose_umask):
    victim = tmp_path / "victim"
    victim.write_text("private")
    victim.chmod(0o600)
    out = tmp_path / "out.html"
    with pytest.raises(InputError, match="replaced"):
        with atomic_file(out, "w") as f:
            f.write("page")
            (tmp,) = tmp_path.glob(".out.html.*.partial")
            tmp.rename(tmp_path / "moved")
            tmp.symlink_to(victim)
    assert mode_of(victim) == 0o600 and victim.read_text() == "private"
    assert not out.exists() and not out.is_symlink()


def test_cli_outputs_are_private_and_rewrites_keep_their_mode(tmp_path: Path, database_url, collection_name,
                                                             loose_umask):
    """issue 31, item 8: rewriting a 0600 output with ``dedup -o`` / ``report -o`` left a 0644 file."""
    env = base_env(SIMDB_DATABASE_URL=database_url)

    def simdb(*args):
        p = subprocess.run(simdb_argv() + [str(a) for a in args], check=False, capture_output=True, text=True,
                           env=env, timeout=180)
        assert p.returncode == 0, p.stderr

    records = tmp_path / "in.jsonl"
    records.write_text("".join(json.dumps({"id": f"r{i}", "text": TEXT + f" {i % 2}"}) + "\n" for i in range(4)))
    out, log, page = tmp_path / "out.jsonl", tmp_path / "removed.jsonl", tmp_path / "r.html"
    simdb("dedup", records, "-o", out, "--removed", log)
    simdb("add", records, "-c", collection_name)
    simdb("report", "-c", collection_name, "--output", page)
    assert [mode_of(p) for p in (out, log, page)] == [0o600] * 3
    out.chmod(0o640)
    page.chmod(0o644)
    simdb("dedup", records, "-o", out, "--removed", log)
    simdb("report", "-c", collection_name, "--output", page)
    assert [mode_of(p) for p in (out, log, page)] == [0o640, 0o600, 0o644]


# --------------------------------------------------------------------------- terminal escapes

NASTY = {"title": "\x1b]0;pwned\x07", "cr": "ok\rFAKE", "bidi": "txt.\u202eexe", "csi": "a\x9b2Jb", "nl": "one\ntwo"}
RAW = ("\x1b", "\r", "\u202e", "\x9b", "\x07")


def test_shown_escapes_controls_and_bidi_and_nothing_else():
    from simdb.cli.output import shown, table

    assert shown(NASTY["title"]) == "\\x1b]0;pwned\\x07"
    assert shown(NASTY["cr"]) == "ok\\rFAKE"
    assert shown(NASTY["bidi"]) == "txt.\\u202eexe"
    assert shown(NASTY["nl"]) == "one\\ntwo" and shown(NASTY["nl"], lines=True) == "one\ntwo"
    assert shown("\u2066\u2069\u200e\u200f\u061c\x7f\x00") == "\\u2066\\u2069\\u200e\\u200f\\u061c\\x7f\\x00"
    assert shown("中文 café naïve – ok\\x1b") == "中文 café naïve – ok\\x1b"  # printable text (a backslash too) unchanged
    lines = table(["key"], [[NASTY["nl"]], [NASTY["title"]]]).splitlines()
    assert lines[2:] == ["one\\ntwo", "\\x1b]0;pwned\\x07"]


def test_cli_prints_keys_escaped_on_terminals_and_exact_in_json(tmp_path: Path, database_url, collection_name):
    env = base_env(SIMDB_DATABASE_URL=database_url)

    def simdb(*args):
        p = subprocess.run(simdb_argv() + [str(a) for a in args] + ["-c", collection_name], check=False,
                           capture_output=True, text=True, env=env, timeout=180)
        assert p.returncode in (0, 1), p.stderr
        return p

    records = tmp_path / "nasty.jsonl"
    records.write_text("".join(json.dumps({"id": key, "text": TEXT}) + "\n" for key in NASTY.values()))
    simdb("add", records)
    probe = tmp_path / "probe.txt"
    probe.write_text(TEXT)
    shown_keys = ["\\x1b]0;pwned\\x07", "ok\\rFAKE", "txt.\\u202eexe", "a\\x9b2Jb", "one\\ntwo"]
    for args in (["dups"], ["dups", "--pairs"], ["query", TEXT], ["check", probe], ["stats"]):
        p = simdb(*args)
        for raw in RAW:
            assert raw not in p.stdout + p.stderr, (args, raw)
        assert "one\ntwo" not in p.stdout, args
        if args[0] in ("dups", "query"):
            assert all(k in p.stdout for k in shown_keys), (args, p.stdout)
    for args in (["dups", "--json"], ["query", "--json", TEXT]):  # a data format: the exact keys...
        p = simdb(*args)
        assert set(NASTY.values()) <= _strings(json.loads(p.stdout)), args
        assert not any(raw in p.stdout for raw in RAW), args  # ...written with JSON's own escapes


def _strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    items = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return set().union(*map(_strings, items)) if items else set()
