"""Every example of docs/dedup.md runs, and says what it does: the sh blocks in order in one
directory (later blocks use earlier files), the python blocks with the database in the env."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cli_support import REPO, base_env
from test_docs_examples import parse_blocks

DOC = REPO / "docs" / "dedup.md"


def _blocks(lang: str) -> list[str]:
    """The runnable blocks of a language (not those marked skip-test), as test_docs_examples reads them."""
    return [b.code for b in parse_blocks(DOC) if b.lang == lang and b.skip is None]


def test_shell_examples_run(fresh_database_url, tmp_path):
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "simdb").exists()
    env = base_env(SIMDB_DATABASE_URL=fresh_database_url, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    blocks = _blocks("sh")
    assert len(blocks) == 3
    for block in blocks:
        p = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, block + p.stdout + p.stderr
    assert [json.loads(x)["id"] for x in (tmp_path / "clean.jsonl").read_text().splitlines()] == ["a", "c"]
    log = [json.loads(x) for x in (tmp_path / "removed.jsonl").read_text().splitlines()]
    assert log == [{"removed": "b", "kept": "a", "jaccard": 1.0, "distance": 0, "where": "crawl.jsonl:2"}]
    assert (tmp_path / "clean.jsonl").read_bytes().splitlines()[1] == (tmp_path / "crawl.jsonl").read_bytes(
    ).splitlines()[2]
    day2 = [json.loads(x) for x in (tmp_path / "day2-removed.jsonl").read_text().splitlines()]
    assert [(r["removed"], r["kept"]) for r in day2] == [("d", "c")]
    assert (tmp_path / "day2.jsonl").read_text() == ""


def test_python_examples_run(fresh_database_url, monkeypatch):
    monkeypatch.setenv("SIMDB_DATABASE_URL", fresh_database_url)
    blocks = _blocks("python")
    assert blocks
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), {})
