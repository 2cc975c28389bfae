"""Deleting records of a loaded default collection: ``remove_many`` against ``remove`` one key at a time.

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_deletes.py --rows 1000000 --deletes 10000

A dataset that stays live (issue 46) deletes or replaces records after it was deduplicated; datasketch's
users report 77 deletes taking 50 minutes. The collection (``--rows`` paragraphs of
``bench_bands.make_texts``, the default banded rule: a primary key, four block indexes and 14 band-key
indexes a row) is loaded once into an embedded server under ``--home`` and kept; each run deletes
``--deletes`` keys three ways, in one process, and adds them back between the ways (``add_many``):

- ``remove_many(keys)``: one statement;
- ``remove(key)`` for each key inside one ``transaction()``: a statement a key, one commit;
- ``remove(key)`` for each key, each its own commit (``--one-by-one N`` of them, timed and scaled to
  ``--deletes``: at ~1 ms a commit it is the slow way).

Prints one JSON line (also appended to benchmarks/results/deletes.jsonl): seconds of each way, and the
rows left, which must be ``--rows`` minus the keys deleted.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_bands import make_texts  # noqa: E402
from simdb.embedded import start_server  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--deletes", type=int, default=10_000)
    ap.add_argument("--one-by-one", type=int, default=1_000, help="keys removed one commit each (scaled up)")
    ap.add_argument("--home", default="/tmp/simdb-bench-deletes", help="kept server home (the collection stays)")
    args = ap.parse_args()
    server = start_server(Path(args.home) / "pgdata", cleanup_mode=None)
    db = f"deletes{args.rows}"
    with psycopg.connect(server.get_uri(), autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            c.execute(f"CREATE DATABASE {db}")
    parts = psycopg.conninfo.conninfo_to_dict(psycopg.conninfo.make_conninfo(server.get_uri(), dbname=db))
    url = "postgresql+psycopg:///?" + "&".join(f"{k}={v}" for k, v in parts.items())
    texts = make_texts(args.rows, 1)
    out: dict = {"command": "benchmarks/bench_deletes.py " + " ".join(sys.argv[1:]), "rows": args.rows,
                 "deletes": args.deletes}
    with SimhashIndex(url, "bench") as ix:
        if len(ix) != args.rows:
            ix.clear()
            t0 = time.perf_counter()
            ix.add_many((f"r{i}", t) for i, t in enumerate(texts))
            out["load_s"] = round(time.perf_counter() - t0, 1)
        picked = random.Random(7).sample(range(args.rows), args.deletes)
        keys = [f"r{i}" for i in picked]

        def put_back(which: list[int]) -> None:
            ix.add_many((f"r{i}", texts[i]) for i in which)

        t0 = time.perf_counter()
        removed = ix.remove_many(keys)
        out["remove_many_s"] = round(time.perf_counter() - t0, 3)
        out["left_after_remove_many"] = len(ix)
        assert removed == args.deletes and len(ix) == args.rows - args.deletes
        put_back(picked)

        t0 = time.perf_counter()
        with ix.transaction():
            for key in keys:
                ix.remove(key)
        out["remove_in_one_transaction_s"] = round(time.perf_counter() - t0, 3)
        assert len(ix) == args.rows - args.deletes
        put_back(picked)

        few = keys[: args.one_by_one]
        t0 = time.perf_counter()
        for key in few:
            ix.remove(key)
        seconds = time.perf_counter() - t0
        out["remove_one_commit_each_s"] = round(seconds * args.deletes / len(few), 3)
        out["remove_one_commit_each_measured"] = len(few)
        put_back(picked[: args.one_by_one])
        assert len(ix) == args.rows
    line = json.dumps(out)
    print(line)
    with open(ROOT / "benchmarks" / "results" / "deletes.jsonl", "a", encoding="utf-8") as fh:
        fh.write(line + "\n")


if __name__ == "__main__":
    main()
