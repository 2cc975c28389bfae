"""tools/mutate.py, the mutation tester, on a tiny module: it makes the mutants it
promises, a test that checks the behaviour kills them, and a test that checks
nothing lets them survive (so the score means something)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("simdb_mutate_tool", ROOT / "tools" / "mutate.py")
mutate = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = mutate  # dataclasses look their module up
spec.loader.exec_module(mutate)

SOURCE = '''"""A module."""

__all__ = ["clamp"]


def clamp(x, lo=0, hi=10):
    """Doc."""
    if x < lo:
        return lo
    if x > hi and True:
        return hi
    return x + 0
'''


def test_mutants_listed():
    descs = [(m.line, m.description) for m in mutate.list_mutants(SOURCE)]
    assert (8, "< -> <=") in descs and (8, "negate condition") in descs
    assert (9, "return None") in descs and (10, "and -> or") in descs
    assert (12, "+ -> -") in descs and (12, "0 -> 1") in descs and (12, "0 -> -1") in descs
    assert (6, "0 -> 1") in descs  # default argument values are mutated too
    assert not [d for line, d in descs if line in (1, 3, 7)]  # docstrings and __all__ are not
    for m in mutate.list_mutants(SOURCE):
        compile(mutate.mutated_source(SOURCE, m.index), "mutant", "exec")  # every mutant is valid Python


def test_pragma_skips_a_line():
    src = SOURCE.replace("    return x + 0", "    return x + 0  # pragma: no mutate")
    assert not [m for m in mutate.list_mutants(src) if m.line == 12]


def _project(tmp_path, test_body):
    (tmp_path / "pkg").mkdir(parents=True)
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(SOURCE)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_mod.py").write_text("from pkg.mod import clamp\n\n\ndef test_clamp():\n" + test_body)
    return subprocess.run(
        [sys.executable, str(ROOT / "tools" / "mutate.py"), "pkg/mod.py", "tests/test_mod.py",
         "--root", str(tmp_path), "--pytest-args", "", "--only", "4,6,7,12,14"],  # each mutant is a pytest run
        capture_output=True, text=True, timeout=600,
        # the tiny project's tests need no plugin: without the installed ones (Django, Hypothesis, ...)
        # each of its dozen pytest runs starts in ~0.4 s of CPU instead of ~2.5 s
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"},
    )


def test_a_good_test_kills_and_a_vacuous_one_does_not(tmp_path):
    good = _project(tmp_path / "good", "    assert [clamp(x) for x in (-1, 0, 5, 10, 11)] == [0, 0, 5, 10, 10]\n"
                                        "    assert clamp(3, 4, 9) == 4 and clamp(9, 0, 8) == 8\n")
    bad = _project(tmp_path / "bad", "    clamp(5)\n")
    assert "mutation score" in good.stdout and "mutation score" in bad.stdout, good.stdout + good.stderr
    good_score = float(good.stdout.split("mutation score ")[1].split("%")[0])
    bad_score = float(bad.stdout.split("mutation score ")[1].split("%")[0])
    # negated conditions, return None, and 0 -> 1 in `x + 0`: a test of the behaviour kills each one
    assert good_score == 100.0 and "5 killed" in good.stdout, good.stdout
    assert bad_score == 0.0 and "5 surviving" in bad.stdout, bad.stdout
    assert "pkg/mod.py | clamp | return x + 0 | return None" in bad.stdout  # the line to list if equivalent
    assert good.returncode == 0
