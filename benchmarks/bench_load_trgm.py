"""The default collection's load against pg_trgm's (COPY + GIN + ANALYZE) and, optionally, another
checkout's load of the same texts, in one run on one server.

    flock /tmp/simdb-bench.lock python benchmarks/bench_load_trgm.py [--texts 100000] [--rounds 2]
        [--baseline-root /tmp/simdb-6efc7b1]   # git worktree add --detach /tmp/simdb-6efc7b1 6efc7b1

The texts are ``bench_load_against.py``'s 100,000 English paragraphs (300-1,900 characters). Each load
runs in a process of its own (so each imports its own ``simdb``), into a fresh database, after a warm-up
load of 2,000 texts (caches, jieba, the worker pool), with ``add_many``'s defaults (``workers``: the
usable cores). pg_trgm's load is what a user of it would run: ``COPY`` of (key, text) into an empty table,
``CREATE INDEX ... USING gin (text gin_trgm_ops)`` and ``ANALYZE``, in one transaction. Rounds alternate
the loads; the best second of each is reported, with the ratios the issue asks for.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent


def paragraphs(n: int) -> list[str]:
    """``bench_load_against.py``'s texts: a docstring and a piece of another one."""
    sys.path.insert(0, str(HERE))
    from corpus import english_pieces

    pieces = [p for p in english_pieces() if 300 <= len(p) <= 1500]
    m = len(pieces)
    return [pieces[i % m] + " " + pieces[(i * 7 + 1 + i // m) % m][: 100 + (i * 37) % 400] for i in range(n)]


def fresh_database(url: str) -> str:
    """A new database on ``url``'s server; its SQLAlchemy URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    name = "bench_trgm_" + uuid.uuid4().hex[:8]
    with psycopg.connect(url.replace("+psycopg", ""), autocommit=True) as c:
        c.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def simdb_load(root: str, url: str, n: int) -> float:
    """Seconds of ``add_many`` of the texts into a new default collection (``root``'s simdb)."""
    import simdb
    from simdb import SimhashIndex

    assert Path(simdb.__file__).resolve().is_relative_to(Path(root).resolve()), (simdb.__file__, root)
    texts = paragraphs(n)
    ix = SimhashIndex(fresh_database(url), "c")
    ix.add_many((str(i), t) for i, t in enumerate(texts[:2000]))  # warm: caches, jieba, the pool
    ix.connection().execute("TRUNCATE simdb_fingerprints CASCADE")
    t0 = time.perf_counter()
    ix.add_many((str(i), t) for i, t in enumerate(texts))
    return time.perf_counter() - t0


def trgm_load(url: str, n: int) -> float:
    """Seconds of COPY + GIN (gin_trgm_ops) + ANALYZE of the texts, in one transaction."""
    import psycopg

    texts = paragraphs(n)
    with psycopg.connect(fresh_database(url).replace("+psycopg", "")) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        c.commit()
        t0 = time.perf_counter()
        c.execute("CREATE TABLE docs (key text PRIMARY KEY, body text NOT NULL)")
        with c.cursor().copy("COPY docs (key, body) FROM STDIN") as cp:
            for i, t in enumerate(texts):
                cp.write_row((str(i), t))
        c.execute("CREATE INDEX docs_trgm ON docs USING gin (body gin_trgm_ops)")
        c.execute("ANALYZE docs")
        c.commit()
        return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--baseline-root", help="another checkout whose default load to compare with")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "ROOT", "URL"), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        kind, root, url = a.child
        sys.path.insert(0, root)
        print(trgm_load(url, a.texts) if kind == "trgm" else simdb_load(root, url, a.texts), flush=True)
        return 0
    sys.path.insert(0, str(HERE))
    from server import bench_server

    this = str(HERE.parent)
    loads = [("simdb", this)] + ([("baseline", a.baseline_root)] if a.baseline_root else []) + [("pg_trgm", this)]
    runs: dict[str, list[float]] = {label: [] for label, _ in loads}
    env = dict(os.environ, PYTHONPATH="")
    with bench_server() as url:
        for _ in range(a.rounds):
            for label, root in loads:
                kind = "trgm" if label == "pg_trgm" else "simdb"
                out = subprocess.run([sys.executable, __file__, "--texts", str(a.texts), "--child", kind, root, url],
                                     capture_output=True, text=True, check=True, cwd="/", env=env)
                runs[label].append(float(out.stdout.strip().splitlines()[-1]))
                print(f"  {label:9s} {runs[label][-1]:7.2f} s", flush=True)
    best = {k: min(v) for k, v in runs.items()}
    summary = {"command": " ".join(["benchmarks/bench_load_trgm.py", *sys.argv[1:]]), "cpus": os.cpu_count(),
               "texts": a.texts, "seconds": runs, "trgm_over_simdb": round(best["pg_trgm"] / best["simdb"], 2)}
    if a.baseline_root:
        summary["simdb_over_baseline"] = round(best["simdb"] / best["baseline"], 2)
    print(json.dumps(summary))
    with open(HERE / "results" / "load_trgm.jsonl", "a") as f:
        f.write(json.dumps(summary) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
