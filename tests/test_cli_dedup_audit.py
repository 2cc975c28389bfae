"""``simdb dedup``'s new-user audit: each problem it found, as the behaviour that replaces it.

The commands run in this process (``cli_support.run_in_process``) on a real PostgreSQL; the readers'
own rules (BOM, JSON positions, multi-line CSV records) are tested on the readers, with no database."""

from __future__ import annotations

import json
import os

import pytest
from cli_support import run_in_process


def cli(*args, cwd=None, input=None):
    return run_in_process([str(a) for a in args], cwd=cwd, input=input)


def one_line_error(p) -> str:
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    assert lines[0].startswith("simdb: error: "), lines[0]
    return lines[0]


DATA = "".join(json.dumps({"id": f"r{i}", "text": f"the quick brown fox {i % 3} jumps over the lazy dog {i % 3}"})
               + "\n" for i in range(9))


# --------------------------------------------------------------------------- 1. --removed never replaces an input


@pytest.mark.parametrize("link", ["same", "relative", "symlink", "hardlink"])
def test_removed_naming_an_input_is_refused_and_the_input_kept(database_url, tmp_path, link):
    (tmp_path / "in.jsonl").write_text(DATA)
    removed = {"same": "in.jsonl", "relative": "./sub/../in.jsonl", "symlink": "sym.jsonl", "hardlink": "hard.jsonl"}[link]
    (tmp_path / "sub").mkdir()
    if link == "symlink":
        os.symlink(tmp_path / "in.jsonl", tmp_path / "sym.jsonl")
    elif link == "hardlink":
        os.link(tmp_path / "in.jsonl", tmp_path / "hard.jsonl")
    p = cli("dedup", "in.jsonl", "-o", "out.jsonl", "--removed", removed, "--database-url", database_url,
            cwd=tmp_path)
    assert p.returncode == 2 and f"--removed {removed} is also an input" in one_line_error(p)
    assert (tmp_path / "in.jsonl").read_text() == DATA and not (tmp_path / "out.jsonl").exists()


def test_removed_naming_the_output_is_refused(database_url, tmp_path):
    (tmp_path / "in.jsonl").write_text(DATA)
    os.symlink(tmp_path / "out.jsonl", tmp_path / "dangling.jsonl")  # out.jsonl does not exist yet
    for output, removed in [("out.jsonl", "out.jsonl"), ("out.jsonl", "dangling.jsonl"), ("-", "-")]:
        p = cli("dedup", "in.jsonl", "-o", output, "--removed", removed, "--database-url", database_url,
                cwd=tmp_path)
        assert p.returncode == 2 and "--output and --removed must be different files" in one_line_error(p)
    assert sorted(os.listdir(tmp_path)) == ["dangling.jsonl", "in.jsonl"]
