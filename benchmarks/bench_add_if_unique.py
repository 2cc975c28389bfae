"""``SimhashIndex.add_if_unique`` one call at a time: by fingerprint in a Hamming collection, and by text in
the default (banded) one, in a private embedded server; ``--compare-with TREE`` runs the same calls with
the simdb of another source tree (e.g. ``git archive <commit> | tar -x -C /tmp/old``), alternating the two
in each round, so that the ratio is measured on one machine at one time.

    python benchmarks/bench_add_if_unique.py --calls 400 --rounds 3 --compare-with /tmp/old

Prints ms per call (median of the rounds) for each tree.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from simdb.embedded import start_server
from simdb.store.migrate import migrate

# one process per (tree, round): the code under test is the simdb on its PYTHONPATH
WORKER = r"""
import random, sys, time, uuid
from simdb.index import SimhashIndex
url, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(7)
words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau".split()
texts = [" ".join(rng.choice(words) for _ in range(30)) + f" {i}" for i in range(n + 20)]
with SimhashIndex(url, "h-" + uuid.uuid4().hex[:8], verify=False) as ix:
    for i in range(20):
        ix.add_if_unique(f"w{i}", fp=rng.getrandbits(64))
    t = time.perf_counter()
    for i in range(n):
        ix.add_if_unique(f"k{i}", fp=rng.getrandbits(64))
    hamming = (time.perf_counter() - t) / n * 1e3
with SimhashIndex(url, "t-" + uuid.uuid4().hex[:8]) as ix:
    for i in range(20):
        ix.add_if_unique(f"w{i}", texts[n + i])
    t = time.perf_counter()
    for i in range(n):
        ix.add_if_unique(f"k{i}", texts[i])
    banded = (time.perf_counter() - t) / n * 1e3
print(hamming, banded)
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare-with", metavar="TREE", help="also run the calls with the simdb of this source tree")
    args = ap.parse_args()
    server = start_server(Path(tempfile.mkdtemp(prefix="bench-aiu-pg-")) / "pgdata", cleanup_mode="delete")
    url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    trees = {"this tree": str(Path(__file__).resolve().parent.parent)}
    if args.compare_with:
        trees[args.compare_with] = os.path.abspath(args.compare_with)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    try:
        migrate(url)
        for _ in range(args.rounds):
            for name, root in trees.items():
                env = dict(os.environ, PYTHONPATH=root)
                out = subprocess.run([sys.executable, "-c", WORKER, url, str(args.calls)], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                got[name].append((float(out[0]), float(out[1])))
    finally:
        server.cleanup()
    for name, runs in got.items():
        h = statistics.median(r[0] for r in runs)
        b = statistics.median(r[1] for r in runs)
        print(f"{name:>20}: Hamming add_if_unique(fp=) {h:.3f} ms/call, banded add_if_unique(text) {b:.3f} ms/call")


if __name__ == "__main__":
    main()
