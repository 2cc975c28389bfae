"""The CLI's wall time on the embedded default (issue 29, item 3): ``simdb --help`` and a warm ``simdb query``.

For each tree given (``--tree``, default: this checkout), in a fresh SIMDB_HOME:
``simdb add`` of the sample fables, then ``--runs`` timed runs of

* ``simdb --help`` (imports only: no server);
* ``simdb query -c fables --file <a typo'd fable>``, end to end, each a new process.
  With the server lifetime of issue 29 the server stays up ``SIMDB_EMBEDDED_IDLE``
  seconds after a command, so every run after ``add`` finds it warm; on a tree
  without it each run starts and stops the server (that is the "before").

Bytecode is cached (``PYTHONPYCACHEPREFIX`` in the temp dir, even where
``PYTHONDONTWRITEBYTECODE`` is set), as for an installed package; one untimed run
of each command warms that cache.

Reports wall p50 / min / max and the p50 of the command's own CPU seconds (user +
system: on a shared machine the wall time is mostly waiting for a core; where the warm
command process of issue 29 ran the command, its CPU and its child's count too) as one JSON
line per tree and command (appended
to benchmarks/results/cli.jsonl with --save). Each tree runs as ``python -m
simdb.cli`` with that tree first on PYTHONPATH; the server is stopped at the end.

    python benchmarks/bench_cli.py [--tree /work/main --tree .] [--runs 10] [--save]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "examples" / "sample"
QUERY = SAMPLE / "variants" / "lion-and-mouse.typo.txt"


def _env(tree: Path, home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIMDB_", "PG")) and k != "PYTHONDONTWRITEBYTECODE"}
    # bytecode as an installed package has it, cached outside the trees (nothing is written into them)
    env.update(PYTHONPATH=str(tree), SIMDB_HOME=str(home), SIMDB_EMBEDDED_IDLE="120",
               PYTHONPYCACHEPREFIX=str(Path(tempfile.gettempdir()) / "simdb-bench-cli-pycache"))
    return env


def _warm_cpu(home: Path) -> tuple[int | None, float]:
    """(pid, CPU seconds so far of itself and its reaped children) of the home's warm command process
    (simdb.cli.warm; none before issue 29's item 3): a command it runs is a child of it, not of ours."""
    try:
        pid = int((home / ".simdb-warm" / "lock").read_text().strip())
        proc = psutil.Process(pid)
        deadline = time.monotonic() + 10
        while proc.children() and time.monotonic() < deadline:  # the command's child is reaped in <= 0.5 s
            time.sleep(0.01)
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return pid, sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
    except (OSError, ValueError, psutil.Error):
        return None, 0.0


def _simdb(env: dict, *args: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one command in a new process: the process itself, plus the warm
    command process's share where one ran it.

    Run from the tree (``python -m`` puts the current directory first on sys.path)."""
    home = Path(env["SIMDB_HOME"])
    warm0 = _warm_cpu(home)
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "simdb.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, cwd=env["PYTHONPATH"])
    wall = time.perf_counter() - start
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    warm1 = _warm_cpu(home)
    if proc.returncode != 0:
        raise SystemExit(f"simdb {' '.join(args)} failed ({proc.returncode}): {proc.stderr.strip()}")
    warm = warm1[1] - warm0[1] if warm0[0] is not None and warm0[0] == warm1[0] else 0.0
    return wall, (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime) + warm


def bench_tree(tree: Path, runs: int) -> list[dict]:
    home = Path(tempfile.mkdtemp(prefix="simdb-bench-cli-"))
    env = _env(tree, home)
    rows = []
    try:
        _simdb(env, "add", "-q", "-c", "fables", str(SAMPLE / "originals"))
        for name, args in (("--help", ["--help"]), ("query (warm)", ["query", "-c", "fables", "--file", str(QUERY)])):
            _simdb(env, *args)  # untimed: bytecode cache
            measured = [_simdb(env, *args) for _ in range(runs)]
            times, cpu = [m[0] for m in measured], [m[1] for m in measured]
            rows.append({"tree": str(tree), "command": name, "runs": runs, "p50_s": round(statistics.median(times), 3),
                         "min_s": round(min(times), 3), "max_s": round(max(times), 3),
                         "cpu_p50_s": round(statistics.median(cpu), 3),
                         "machine": f"{platform.node()} {os.cpu_count()} cpus", "load1": round(os.getloadavg()[0], 2)})
    finally:
        subprocess.run([sys.executable, "-m", "simdb.cli", "server", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", type=Path, help="a simdb checkout (repeatable; default: this one)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--save", action="store_true", help="append the rows to benchmarks/results/cli.jsonl")
    args = ap.parse_args()
    for tree in args.tree or [ROOT]:
        for row in bench_tree(tree.resolve(), args.runs):
            print(json.dumps(row), flush=True)
            if args.save:
                with open(ROOT / "benchmarks" / "results" / "cli.jsonl", "a", encoding="utf-8") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
