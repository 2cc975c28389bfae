#!/usr/bin/env python
"""A small AST mutation tester: does the test suite notice when the code is wrong?

Usage (from the repository root)::

    python tools/mutate.py simdb/core/bits.py tests/test_bits.py
    python tools/mutate.py simdb/core/fingerprint/__init__.py tests/test_fingerprint.py --every 5
    python tools/mutate.py simdb/core/bits.py --list            # the mutants, without running anything

Each mutant is one small change to the module's syntax tree: a flipped comparison
(``<`` -> ``<=``, ``==`` -> ``!=``, ``in`` -> ``not in``...), an integer constant
+-1, a swapped arithmetic / bitwise / boolean operator, a negated condition,
``return None``, a removed statement, ``break`` <-> ``continue``. For every mutant
the package is copied to a temporary directory with the mutated module in place
and the given test files run there (``pytest -x -q -p no:cacheprovider`` with the
``mutation`` hypothesis profile of ``tests/conftest.py``: derandomized, no example
database, no deadline), with a timeout. A mutant is *killed* when the tests fail
(or time out), *survives* when they pass.

Why our own mutator rather than mutmut / cosmic-ray: a few hundred lines, no
configuration, no state kept between runs, and it runs one module against the
test files you name, which is the habit we want (mutate what you changed).

Surviving mutants that are *equivalent* (no test could kill them: the changed
code computes the same thing) are listed in ``tools/equivalent_mutants.txt``, one
per line as ``module | function | source line | mutation  # why``. They are
reported separately and left out of the adjusted score. Lines stay valid while
the surrounding code moves, since they name the function and the source text,
not line numbers.

Lines carrying ``# pragma: no mutate`` are not mutated (use it sparingly, with a
reason, for code whose mutants are equivalent by construction).

Exit status: 0 when the adjusted score reaches ``--min-score`` (default 0),
1 otherwise, 2 on bad arguments or when the unmutated tests fail.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CMP_SWAP = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
    ast.In: ast.NotIn, ast.NotIn: ast.In,
}
_BIN_SWAP = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
    ast.LShift: ast.RShift, ast.RShift: ast.LShift,
    ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitOr,
}
_BOOL_SWAP = {ast.And: ast.Or, ast.Or: ast.And}
_SYMBOL = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%",
    ast.Pow: "**", ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
    ast.BitXor: "^", ast.And: "and", ast.Or: "or",
}
_REMOVABLE = (ast.Expr, ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Raise, ast.Delete)


@dataclasses.dataclass
class Mutant:
    index: int
    line: int
    col: int
    function: str
    source_line: str
    description: str

    def key(self, module: str) -> str:
        return f"{module} | {self.function} | {self.source_line} | {self.description}"

    def label(self) -> str:
        return f"line {self.line}:{self.col} in {self.function}: {self.description}    [{self.source_line}]"


def _is_docstring(node: ast.AST, parent: ast.AST | None) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        and isinstance(parent, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    )


class _Sites:
    """Walks a tree in a fixed order and lists every mutation site as (node, parent info, kind, detail)."""

    def __init__(self, tree: ast.Module, lines: list[str]):
        self.lines = lines
        self.sites: list[tuple] = []
        self._visit(tree, None, None, None, "<module>")

    def _skip_line(self, node: ast.AST) -> bool:
        ln = getattr(node, "lineno", None)
        return ln is not None and "pragma: no mutate" in self.lines[ln - 1]

    def _add(self, node, parent, field, idx, func, kind, detail, desc):
        if not self._skip_line(node):
            self.sites.append((node, parent, field, idx, func, kind, detail, desc))

    def _visit(self, node, parent, field, idx, func):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            func = node.name if func == "<module>" else f"{func}.{node.name}"
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return
        if isinstance(node, ast.ImportFrom | ast.Import):
            return
        self._sites_of(node, parent, field, idx, func)
        for name, value in ast.iter_fields(node):
            if name in ("annotation", "returns", "type_comment", "decorator_list"):
                continue
            if isinstance(value, list):
                for i, child in enumerate(value):
                    if isinstance(child, ast.AST):
                        self._visit(child, node, name, i, func)
            elif isinstance(value, ast.AST):
                self._visit(value, node, name, None, func)

    def _sites_of(self, node, parent, field, idx, func):
        add = lambda kind, detail, desc: self._add(node, parent, field, idx, func, kind, detail, desc)  # noqa: E731
        if isinstance(node, ast.Compare):
            for j, op in enumerate(node.ops):
                new = _CMP_SWAP.get(type(op))
                if new:
                    which = f" (comparison {j + 1})" if len(node.ops) > 1 else ""
                    add("cmp", (j, new), f"{_SYMBOL[type(op)]} -> {_SYMBOL[new]}{which}")
        elif isinstance(node, (ast.BinOp, ast.AugAssign)):
            new = _BIN_SWAP.get(type(node.op))
            if new:
                add("binop", new, f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}")
        elif isinstance(node, ast.BoolOp):
            add("boolop", _BOOL_SWAP[type(node.op)], f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[_BOOL_SWAP[type(node.op)]]}")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add("unnot", None, "not x -> x")
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and parent is not None:
            add("unneg", None, "-x -> x")
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            add("int", node.value + 1, f"{node.value} -> {node.value + 1}")
            add("int", node.value - 1, f"{node.value} -> {node.value - 1}")
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            add("int", not node.value, f"{node.value} -> {not node.value}")
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            add("negate", None, "negate condition")
        if isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None
        ):
            add("return_none", None, "return None")
        if isinstance(node, ast.Break):
            add("swap_jump", ast.Continue, "break -> continue")
        elif isinstance(node, ast.Continue):
            add("swap_jump", ast.Break, "continue -> break")
        if isinstance(node, _REMOVABLE) and not _is_docstring(node, parent) and isinstance(idx, int):
            add("remove", None, f"remove statement ({type(node).__name__})")


def _apply(site) -> None:
    node, parent, field, idx, _func, kind, detail, _desc = site

    def replace(new):
        if idx is None:
            setattr(parent, field, new)
        else:
            getattr(parent, field)[idx] = new

    if kind == "cmp":
        j, new = detail
        node.ops[j] = new()
    elif kind in ("binop", "boolop"):
        node.op = detail()
    elif kind in ("unnot", "unneg"):
        replace(node.operand)
    elif kind == "int":
        node.value = detail
    elif kind == "negate":
        node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)
    elif kind == "return_none":
        node.value = ast.Constant(value=None)
    elif kind == "swap_jump":
        replace(detail())
    elif kind == "remove":
        replace(ast.Pass())
    else:  # pragma: no cover
        raise AssertionError(kind)


def list_mutants(source: str) -> list[Mutant]:
    lines = source.splitlines()
    tree = ast.parse(source)
    out = []
    for i, s in enumerate(_Sites(tree, lines).sites):
        node = s[0]
        ln = getattr(node, "lineno", 0)
        out.append(Mutant(i, ln, getattr(node, "col_offset", 0), s[4], lines[ln - 1].strip() if ln else "", s[7]))
    return out


def mutated_source(source: str, index: int) -> str:
    tree = ast.parse(source)
    sites = _Sites(tree, source.splitlines()).sites
    _apply(sites[index])
    return ast.unparse(ast.fix_missing_locations(tree)) + "\n"


def read_equivalents(path: Path) -> set[str]:
    """Keys of known-equivalent mutants (comments after ``#`` and blank lines ignored)."""
    if not path.exists():
        return set()
    keys = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("  # ", 1)[0].strip()
        if line and not line.startswith("#"):
            keys.add(" | ".join(part.strip() for part in line.split(" | ")))
    return keys


def _copy_tree(root: Path, dest: Path, module: Path, tests: list[Path]) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", ".pytest_cache")
    tops = {module.parts[0]} | {t.parts[0] for t in tests if len(t.parts) > 1}
    for top in sorted(tops):
        src = root / top
        if src.is_dir():
            shutil.copytree(src, dest / top, ignore=ignore)
    for cfg in ("pyproject.toml", "setup.cfg", "pytest.ini", "tox.ini", "conftest.py"):
        if (root / cfg).is_file():
            shutil.copy2(root / cfg, dest / cfg)
    for t in tests:
        if not (dest / t).exists():
            (dest / t).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / t, dest / t)


def _run_tests(workdir: Path, tests: list[Path], timeout: float, extra: list[str]) -> tuple[str, float]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(workdir) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["SIMDB_MUTATION_RUN"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *extra, *map(str, tests)]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - t0
    elapsed = time.monotonic() - t0
    if proc.returncode == 0:
        return "survived", elapsed
    if proc.returncode == 5:  # no tests collected
        return "error", elapsed
    return "killed", elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("module", help="the module to mutate, e.g. simdb/core/bits.py")
    ap.add_argument("tests", nargs="*", help="test files to run against each mutant")
    ap.add_argument("--every", type=int, default=1, help="run every Nth mutant only (sampling for big modules)")
    ap.add_argument("--offset", type=int, default=0, help="with --every: start at this mutant index")
    ap.add_argument("--only", type=str, default=None, help="comma-separated mutant indexes to run")
    ap.add_argument("--timeout", type=float, default=None,
                    help="seconds per mutant (default: 3 x the unmutated run + 10)")
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="repository root (default: cwd)")
    ap.add_argument("--equivalents", type=Path, default=None,
                    help="list of equivalent mutants (default: tools/equivalent_mutants.txt under --root)")
    ap.add_argument("--list", action="store_true", help="list the mutants and exit")
    ap.add_argument("--min-score", type=float, default=0.0, help="fail (exit 1) below this adjusted score (0..100)")
    ap.add_argument("--pytest-args", default="--hypothesis-profile=mutation",
                    help="extra pytest arguments (default: %(default)s)")
    args = ap.parse_args(argv)

    root = args.root.resolve()
    module = Path(args.module)
    if module.is_absolute():
        module = module.relative_to(root)
    if not (root / module).is_file():
        print(f"error: module {module} not found under {root}", file=sys.stderr)
        return 2
    source = (root / module).read_text(encoding="utf-8")
    mutants = list_mutants(source)
    equivalents = read_equivalents(args.equivalents or root / "tools" / "equivalent_mutants.txt")
    modname = module.as_posix()
    if args.list:
        for m in mutants:
            tag = "  (equivalent)" if m.key(modname) in equivalents else ""
            print(f"#{m.index:4d} {m.label()}{tag}")
        print(f"{len(mutants)} mutants")
        return 0
    if not args.tests:
        print("error: name the test files to run (or use --list)", file=sys.stderr)
        return 2
    if args.every < 1:
        print("error: --every must be >= 1", file=sys.stderr)
        return 2
    tests = [Path(t) for t in args.tests]
    for t in tests:
        if not (root / t).exists():
            print(f"error: test file {t} not found under {root}", file=sys.stderr)
            return 2
    if args.only:
        try:
            chosen = [mutants[int(i)] for i in args.only.split(",")]
        except (ValueError, IndexError):
            print(f"error: --only takes mutant indexes 0..{len(mutants) - 1} (see --list)", file=sys.stderr)
            return 2
    else:
        chosen = [m for m in mutants if m.index >= args.offset and (m.index - args.offset) % args.every == 0]
    extra = args.pytest_args.split() if args.pytest_args else []

    with tempfile.TemporaryDirectory(prefix="simdb-mutate-") as tmp:
        work = Path(tmp)
        _copy_tree(root, work, module, tests)
        target = work / module
        status, base = _run_tests(work, tests, timeout=3600, extra=extra)
        if status != "survived":
            print(f"error: the tests do not pass on the unmutated code ({status}); fix that first", file=sys.stderr)
            return 2
        timeout = args.timeout or 3 * base + 10
        print(f"{modname}: {len(mutants)} mutants, running {len(chosen)}"
              f"{f' (every {args.every}th)' if args.every > 1 else ''}; unmutated tests {base:.1f}s, "
              f"timeout {timeout:.0f}s", flush=True)
        killed = survived = 0
        surviving: list[Mutant] = []
        equivalent: list[Mutant] = []
        try:
            for m in chosen:
                target.write_text(mutated_source(source, m.index), encoding="utf-8")
                status, took = _run_tests(work, tests, timeout=timeout, extra=extra)
                if status == "error":
                    print(f"error: no tests collected for mutant #{m.index}", file=sys.stderr)
                    return 2
                if status in ("killed", "timeout"):
                    killed += 1
                elif m.key(modname) in equivalents:
                    equivalent.append(m)
                else:
                    survived += 1
                    surviving.append(m)
                print(f"  #{m.index:4d} {status:9s} {took:5.1f}s  {m.label()}", flush=True)
        finally:
            target.write_text(source, encoding="utf-8")
    run = killed + survived + len(equivalent)
    raw = 100.0 * killed / run if run else 100.0
    adjusted = 100.0 * killed / (killed + survived) if killed + survived else 100.0
    print()
    print(f"{modname}: {run} mutants run, {killed} killed, {len(equivalent)} equivalent, {survived} surviving")
    print(f"mutation score {raw:.1f}% (all run), {adjusted:.1f}% (equivalent mutants excluded)")
    if surviving:
        print("surviving mutants (add a test, or list them in tools/equivalent_mutants.txt with a reason):")
        for m in surviving:
            print(f"  #{m.index:4d} {m.key(modname)}")
    return 0 if adjusted >= args.min_score else 1


if __name__ == "__main__":
    sys.exit(main())
