"""``SimhashIndex.add_if_unique`` one call at a time: by fingerprint in a Hamming collection, and by text in
the default (banded) one, in a private embedded server; ``--compare-with TREE`` runs the same calls with
the simdb of another source tree (e.g. ``git archive <commit> | tar -x -C /tmp/old``), alternating the two
in each round, so that the ratio is measured on one machine at one time.

    python benchmarks/bench_add_if_unique.py --calls 400 --rounds 3 --compare-with /tmp/old

Prints ms per call (median of the rounds) for each tree. Separate processes alternate coarsely, and
on a shared machine their medians drift apart by more than the difference; ``--old-store TREE`` also
runs, in one process, that tree's ``simdb/store/unique.py`` (``dedup.py`` in a tree before its rename; ``run_add_if_unique`` on an Engine)
against this tree's (on the index's thread connection), alternating every 25 calls (40 batches each):

    python benchmarks/bench_add_if_unique.py --calls 400 --rounds 3 --old-store /tmp/old
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

# one process, two store modules: the old tree's unique.py (its imports resolve to this tree's simdb)
INTERLEAVED = r"""
import importlib.util, random, statistics, sys, time, uuid
from simdb.index import SimhashIndex
from simdb.store import unique as new
spec = importlib.util.spec_from_file_location("old_unique", sys.argv[2])
old = importlib.util.module_from_spec(spec)
spec.loader.exec_module(old)
rng = random.Random(7)
times = {"old": [], "new": []}
with SimhashIndex(sys.argv[1], "ab-" + uuid.uuid4().hex[:8], verify=False) as ix:
    conn, cid = ix.connection(), ix.collection_id
    run = {"old": lambda key, fp: old.run_add_if_unique(ix.engine, cid, key, fp, 3),
           "new": lambda key, fp: new.run_add_if_unique(conn, cid, key, fp, 3)}
    for i in range(30):
        run["old"](f"wo{i}", rng.getrandbits(64))
        run["new"](f"wn{i}", rng.getrandbits(64))
    for rnd in range(40):
        for label in ("old", "new") if rnd % 2 else ("new", "old"):
            fps = [rng.getrandbits(64) for _ in range(25)]
            t = time.perf_counter()
            for i, fp in enumerate(fps):
                run[label](f"{label}{rnd}-{i}", fp)
            times[label].append((time.perf_counter() - t) / 25 * 1e3)
o, n = statistics.median(times["old"]), statistics.median(times["new"])
print(f"store add_if_unique (Hamming, by fp), interleaved: old {o:.3f} ms/call, this tree {n:.3f} ms/call, ratio {n / o:.2f}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=400)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--compare-with", metavar="TREE", help="also run the calls with the simdb of this source tree")
    ap.add_argument("--old-store", metavar="TREE", help="also compare store/unique.py (or the older store/dedup.py) of this tree, interleaved")
    args = ap.parse_args()
    server = start_server(Path(tempfile.mkdtemp(prefix="bench-aiu-pg-")) / "pgdata", cleanup_mode="delete")
    url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    trees = {"this tree": str(Path(__file__).resolve().parent.parent)}
    if args.compare_with:
        trees[args.compare_with] = os.path.abspath(args.compare_with)
    got: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
    try:
        migrate(url)
        for rnd in range(args.rounds):
            order = list(trees.items())
            for name, root in order if rnd % 2 else order[::-1]:  # each tree first in every other round
                env = dict(os.environ, PYTHONPATH=root)
                out = subprocess.run([sys.executable, "-c", WORKER, url, str(args.calls)], env=env, check=True,
                                     capture_output=True, text=True).stdout.split()
                got[name].append((float(out[0]), float(out[1])))
        if args.old_store:
            store = Path(args.old_store, "simdb", "store")
            old = str((store / "unique.py" if (store / "unique.py").exists() else store / "dedup.py").resolve())
            env = dict(os.environ, PYTHONPATH=trees["this tree"])
            print(subprocess.run([sys.executable, "-c", INTERLEAVED, url, old], env=env, check=True,
                                 capture_output=True, text=True).stdout.strip())
    finally:
        server.cleanup()
    for name, runs in got.items():
        h = statistics.median(r[0] for r in runs)
        b = statistics.median(r[1] for r in runs)
        print(f"{name:>20}: Hamming add_if_unique(fp=) {h:.3f} ms/call, banded add_if_unique(text) {b:.3f} ms/call")


if __name__ == "__main__":
    main()
