"""The default (verified) load against another checkout's plain load, in one run (issue 13's target
is ">= 0.8x today's plain-collection texts/s": the plain rate when the issue was written).

    git worktree add --detach /tmp/simdb-9509a29 9509a29
    python benchmarks/bench_load_against.py --baseline-root /tmp/simdb-9509a29 [--rounds 2]

Each load runs in a process of its own (so each imports its own ``simdb``): ``add_many`` of the 100,000
English paragraphs of ``bench_ingest.py`` into a fresh database of $SIMDB_DATABASE_URL's server (else an
embedded one), after a warm-up load of 2,000. Rounds alternate baseline plain / this verified / this plain.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent


def one_load(root: str, mode: str, url: str, n: int) -> float:
    """texts/s of one load (run in this process: ``root``'s simdb must be first on sys.path)."""
    import psycopg
    from sqlalchemy.engine import make_url

    import simdb
    from simdb import SimhashIndex

    assert Path(simdb.__file__).resolve().is_relative_to(Path(root).resolve()), (simdb.__file__, root)
    sys.path.insert(0, str(HERE))
    from corpus import english_pieces

    pieces = [p for p in english_pieces() if 300 <= len(p) <= 1500]
    m = len(pieces)
    texts = [pieces[i % m] + " " + pieces[(i * 7 + 1 + i // m) % m][: 100 + (i * 37) % 400] for i in range(n)]
    name = "bench_against_" + uuid.uuid4().hex[:8]
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    ix = SimhashIndex(make_url(url).set(database=name).render_as_string(hide_password=False), "c",
                      **({"verify": False} if mode == "plain" else {}))
    ix.add_many((str(i), t) for i, t in enumerate(texts[:2000]))  # warm: caches, jieba, the pool
    ix.connection().execute("TRUNCATE simdb_fingerprints CASCADE")
    t0 = time.perf_counter()
    ix.add_many((str(i), t) for i, t in enumerate(texts))
    return n / (time.perf_counter() - t0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline-root", required=True, help="a checkout of the code to compare with")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--texts", type=int, default=100_000)
    ap.add_argument("--child", nargs=3, metavar=("ROOT", "MODE", "URL"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        root, mode, url = a.child
        sys.path.insert(0, root)
        print(one_load(root, mode, url, a.texts), flush=True)
        return 0
    sys.path.insert(0, str(HERE))
    from server import bench_server

    this = str(HERE.parent)
    runs = {"baseline plain": [], "verified": [], "plain": []}
    with bench_server() as url:
        for _ in range(a.rounds):
            for label, root, mode in (("baseline plain", a.baseline_root, "plain"), ("verified", this, "verified"),
                                      ("plain", this, "plain")):
                out = subprocess.run([sys.executable, __file__, "--baseline-root", a.baseline_root, "--texts",
                                      str(a.texts), "--child", root, mode, url], capture_output=True, text=True,
                                     check=True, cwd="/")
                rate = float(out.stdout.strip().splitlines()[-1])
                runs[label].append(rate)
                print(f"  {label:15s} {rate:9,.0f} texts/s", flush=True)
    best = {k: max(v) for k, v in runs.items()}
    print(f"verified / baseline plain {best['verified'] / best['baseline plain']:.2f} (target >= 0.8); "
          f"verified / this plain {best['verified'] / best['plain']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
