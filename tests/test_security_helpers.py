"""Helper processes never import from the working directory.

multiprocessing starts its forkserver and resource tracker as ``python -c ...``, which puts the
current directory first on ``sys.path``: a ``struct.py`` another user left in a shared folder ran
as whoever ran ``simdb add`` there (root included), and an honest ``select.py`` made the load fail
(exit 4, ``EOFError``). Each test plants modules that leave a marker file when imported, runs with
worker processes from inside that folder, and checks the run succeeded and no marker appeared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from cli_support import REPO, base_env, simdb_argv

pytestmark = pytest.mark.skipif(sys.platform.startswith("win"), reason="POSIX start methods")

# modules every helper imports before it runs anything of ours (pickle -> struct; connection -> select)
PLANTED = ("struct", "select", "selectors")


def _plant(folder: Path) -> Path:
    marker = folder / "PLANTED-CODE-RAN"
    for name in PLANTED:
        (folder / f"{name}.py").write_text(
            f"with open({str(marker)!r}, 'a') as f:\n    f.write({name!r} + ' ' + str(__import__('os').getpid()) + '\\n')\n")
    return marker


def _env() -> dict:
    return base_env(PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))


POOL = textwrap.dedent("""
    from simdb.util import parallel
    from simdb.core.fingerprint import Fingerprinter

    if __name__ == "__main__":
        print(list(parallel.imap(abs, [-1, -2, -3, -4], 2)))
        print(len(Fingerprinter().many([f"text {i} and more" for i in range(50_000)], workers=2)))
""")


def test_pool_helpers_do_not_import_from_the_working_directory(tmp_path: Path):
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = _plant(shared)
    script = tmp_path / "program" / "load.py"
    script.parent.mkdir()
    script.write_text(POOL)
    done = subprocess.run([sys.executable, str(script)], cwd=shared, env=_env(), capture_output=True, text=True,
                          timeout=300)
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["[1, 2, 3, 4]", "50000"]


def test_simdb_add_with_workers_in_a_planted_folder(tmp_path: Path, database_url, collection_name):
    shared = tmp_path / "shared"
    shared.mkdir()
    marker = _plant(shared)
    data = tmp_path / "data.jsonl"
    with data.open("w") as f:  # more than one chunk of rows: the load goes to the worker pool
        for i in range(20_001):
            f.write(json.dumps({"key": f"k{i}", "text": f"record number {i} about {i % 977} things"}) + "\n")
    done = subprocess.run(
        simdb_argv() + ["add", "--workers", "2", "--database-url", database_url, "-c", collection_name, str(data)],
        cwd=shared, env=_env(), capture_output=True, text=True, timeout=600)
    assert not marker.exists(), marker.read_text()
    assert done.returncode == 0, done.stderr
