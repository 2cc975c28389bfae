"""jieba's dictionary cache is read only from a private directory.

jieba loads ``jieba.cache`` from the shared temporary directory whoever wrote it: another user's
file there changed a Chinese text's words and fingerprint (installs without rjieba, or
``SIMDB_SEGMENTER=jieba``). Each test plants a cache that makes jieba cut the text as one word,
checks that the plant works on jieba itself, then runs simdb's jieba segmenter in a fresh process
and expects the words and fingerprint of a clean run.
"""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import jieba
import pytest
from cli_support import REPO

TEXT = "我们的中文文本很长而且重要"

PROBE = """
import json, sys
from simdb import Fingerprinter
from simdb.core import segment
text = sys.argv[1]
print(json.dumps([segment.segment_runs([text])[0], Fingerprinter().fingerprint(text), getattr(segment, "jieba_cache_dir", lambda: None)()]))
"""


def _planted_cache(path: Path) -> None:
    """A jieba cache whose dictionary has TEXT as one very frequent word."""
    tok = jieba.Tokenizer()
    freq, total = tok.gen_pfdict(tok.get_dict_file())
    for i in range(1, len(TEXT)):
        freq.setdefault(TEXT[:i], 0)
    freq[TEXT] = 10**9
    with open(path, "wb") as f:
        marshal.dump((freq, total + 10**9), f)


def _run(tmp: Path, home: Path, cache_home: Path | None) -> list:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_") and k != "XDG_CACHE_HOME"}
    env.update(SIMDB_SEGMENTER="jieba", TMPDIR=str(tmp), HOME=str(home),
               PYTHONPATH=os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    if cache_home is not None:
        env["XDG_CACHE_HOME"] = str(cache_home)
    done = subprocess.run([sys.executable, "-c", PROBE, TEXT], env=env, capture_output=True, text=True, timeout=120,
                          cwd=str(tmp))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> list:
    base = tmp_path_factory.mktemp("clean")
    (base / "tmp").mkdir()
    return _run(base / "tmp", base, None)


def _jieba_words_with(tmp_dir: Path) -> list[str]:
    tok = jieba.Tokenizer()
    tok.tmp_dir = str(tmp_dir)
    tok.initialize()
    return tok.lcut(TEXT)


def test_a_cache_planted_in_the_temporary_directory_is_not_loaded(tmp_path: Path, clean):
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    _planted_cache(shared / "jieba.cache")
    assert _jieba_words_with(shared) == [TEXT]  # the plant works on jieba itself
    assert clean[0] != [TEXT]
    home = tmp_path / "home"
    home.mkdir()
    words, fp, cache_dir = _run(shared, home, None)
    assert [words, fp] == clean[:2]
    assert cache_dir == str(home / ".cache" / "simdb" / "jieba")
    assert (home / ".cache" / "simdb" / "jieba").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("how", ["group-writable", "world-writable", "someone else's"])
def test_an_unsafe_cache_directory_is_refused(tmp_path: Path, clean, how):
    cache_home = tmp_path / "cache"
    target = cache_home / "simdb" / "jieba"
    target.mkdir(parents=True, mode=0o700)
    os.chmod(cache_home / "simdb", 0o700)
    _planted_cache(target / "jieba.cache")
    if how == "someone else's":
        if os.geteuid() != 0:
            pytest.skip("chown needs root")
        os.chown(target, 65534, 65534)
    else:
        os.chmod(target, 0o770 if how == "group-writable" else 0o777)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    words, fp, cache_dir = _run(tmp, tmp_path, cache_home)
    assert cache_dir is None
    assert [words, fp] == clean[:2]
    assert not list(tmp.iterdir())  # nothing written to the shared temporary directory instead
