"""Memory stays bounded by configuration, not by input: peak RSS of ``simdb add`` / ``simdb dedup`` on
huge records, and RSS growth of ``near()`` over posts of distinct long tokens.

Run (one benchmark at a time on a shared machine; needs GNU time, Debian package ``time``)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_memory.py

Three measurements, printed as one JSON object:

- ``add`` / ``dedup``: ``/usr/bin/time -v simdb add|dedup`` of a ``.jsonl.gz`` of ``--records``
  records of ``--record-mib`` MiB each (repetitive text: the file is ~1 MB compressed, as an
  upload would be); ``peak_rss_mb`` is GNU time's "Maximum resident set size" (the largest
  process of the run: the CLI or one of its pool workers; the database server is not a child).
  Target: <= 1 GB for 800 records of 2 MiB.
- ``near``: one process opens a collection and calls ``near()`` on ``--posts`` posts of
  ``--post-kb`` KB made of distinct tokens (``blob``: one hex token per post; ``words``: hex words
  of 16 characters), RSS measured after the first 5 calls (statements prepared, modules loaded)
  and after the last; ``growth_mb`` is the difference. Target: <= 50 MB for 2,000 posts of 100 KB.

The database is an embedded server under ``--home`` (kept, reused by later runs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import psycopg  # noqa: E402

from simdb.embedded import start_server  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402

WORDS = ("the quick brown fox jumps over lazy dog near river bank while old men watch small boats drift "
         "slowly under grey clouds and children laugh at gulls that steal bread from open hands").split()


def big_record_text(i: int, nbytes: int, rng: random.Random) -> str:
    """``nbytes`` of text: a ~4 KB paragraph (different per record) repeated, so that gzip keeps it small."""
    para = " ".join(rng.choice(WORDS) + (str(i) if j % 50 == 0 else "") for j in range(700)) + "\n"
    return (para * (nbytes // len(para) + 1))[:nbytes]


def write_records(path: Path, records: int, record_bytes: int) -> None:
    rng = random.Random(7)
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        for i in range(records):
            f.write(json.dumps({"key": f"r{i}", "text": big_record_text(i, record_bytes, rng)}) + "\n")


def gnu_time(argv: list[str], env: dict) -> dict:
    """Run ``argv`` under ``/usr/bin/time -v``: exit status, wall seconds, peak RSS (MB)."""
    t0 = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    out = {"rc": done.returncode, "wall_s": round(wall, 1), "peak_rss_mb": round(int(m.group(1)) / 1024) if m else None}
    if done.returncode != 0:
        out["stderr"] = done.stderr[-800:]
    return out


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def post(kind: str, nbytes: int, rng: random.Random) -> str:
    if kind == "blob":
        return rng.randbytes(nbytes // 2).hex()
    return " ".join(rng.randbytes(8).hex() for _ in range(nbytes // 17))


def near_growth(url: str, posts: int, post_bytes: int, kind: str) -> dict:
    rng = random.Random(11)
    with SimhashIndex(url, f"memnear_{kind}") as ix:
        ix.add_many([(f"s{i}", post(kind, 2000, rng)) for i in range(50)])
        before = None
        for i in range(posts):
            ix.near(post(kind, post_bytes, rng))
            if i == 4:
                before = rss_mb()
        after = rss_mb()
    return {"posts": posts, "post_kb": post_bytes // 1000, "kind": kind, "rss_after_5_mb": round(before or 0),
            "rss_after_all_mb": round(after), "growth_mb": round(after - (before or after), 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=800)
    ap.add_argument("--record-mib", type=float, default=2.0)
    ap.add_argument("--posts", type=int, default=2000)
    ap.add_argument("--post-kb", type=int, default=100)
    ap.add_argument("--only", choices=("add", "dedup", "near"), action="append", help="run only these (repeatable)")
    ap.add_argument("--home", default="/tmp/simdb-bench-memory", help="kept server home")
    ap.add_argument("--simdb", default=str(Path(sys.executable).parent / "simdb"), help="the simdb command")
    args = ap.parse_args()
    only = set(args.only or ("add", "dedup", "near"))
    server = start_server(Path(args.home) / "pgdata", cleanup_mode=None)
    db = "memory"
    with psycopg.connect(server.get_uri(), autocommit=True) as c:
        if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", (db,)).fetchone():
            c.execute(f"CREATE DATABASE {db}")
    parts = psycopg.conninfo.conninfo_to_dict(psycopg.conninfo.make_conninfo(server.get_uri(), dbname=db))
    url = "postgresql+psycopg:///?" + "&".join(f"{k}={v}" for k, v in parts.items())
    out: dict = {"command": "benchmarks/bench_memory.py " + " ".join(sys.argv[1:]), "cores": os.cpu_count()}
    env = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix="simdb-bench-memory-") as tmp:
        if only & {"add", "dedup"}:
            data = Path(tmp) / "big.jsonl.gz"
            write_records(data, args.records, int(args.record_mib * 2**20))
            out["input"] = {"records": args.records, "record_mib": args.record_mib,
                            "gz_mb": round(data.stat().st_size / 1e6, 2)}
            if "add" in only:
                coll = f"memadd{int(time.time())}"
                out["add"] = gnu_time([args.simdb, "add", "--database-url", url, "-c", coll, str(data)], env)
            if "dedup" in only:
                out["dedup"] = gnu_time([args.simdb, "dedup", str(data), "-o", str(Path(tmp) / "kept.jsonl")], env)
        if "near" in only:
            out["near"] = [near_growth(url, args.posts, args.post_kb * 1000, kind) for kind in ("blob", "words")]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
