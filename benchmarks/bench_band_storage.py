"""Where a banded verified collection's bytes go (issue 26): per column and per index, per row.

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_band_storage.py --rows 30000

Loads the paragraphs of ``bench_bands.py`` into a plain and a banded collection (fresh databases
of one embedded server) and prints, per row: the heap, the average ``pg_column_size`` of each
column, and ``pg_relation_size`` of each index; then, on the banded table, the size of the
alternatives for the band keys: one GIN index over the ``bands`` array, and 14 hash indexes,
each built next to the 14 btrees and dropped. Figures are per row of the collection.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_bands import make_texts  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402

COLUMNS = ("id", "collection_id", "key", "fp", "b0", "b1", "b2", "b3", "shingles", "bands", "meta", "created_at")


def _url(server_url: str, db: str) -> str:
    url = psycopg.conninfo.make_conninfo(server_url, dbname=db)
    return "postgresql+psycopg:///?" + "&".join(f"{k}={v}" for k, v in psycopg.conninfo.conninfo_to_dict(url).items())


def measure(server_url: str, name: str, texts: list[str]) -> dict:
    db = f"bench_storage_{name}"
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    n = len(texts)
    out: dict = {"collection": name, "rows": n}
    with SimhashIndex(_url(server_url, db), "bench", verify=name != "plain") as ix:
        ix.add_many(((f"r{i}", t) for i, t in enumerate(texts)), workers=1)
        conn = ix.connection()
        conn.execute("VACUUM ANALYZE simdb_fingerprints")
        sizes = ", ".join(f"avg(pg_column_size({c}))" for c in COLUMNS)
        row = conn.execute(f"SELECT {sizes} FROM simdb_fingerprints").fetchone()
        out["column_bytes"] = {c: round(float(v or 0), 1) for c, v in zip(COLUMNS, row)}
        out["heap_bytes_per_row"] = round(conn.execute("SELECT pg_relation_size('simdb_fingerprints')").fetchone()[0] / n)
        out["toast_bytes_per_row"] = round(conn.execute(
            "SELECT coalesce(pg_total_relation_size(reltoastrelid), 0) FROM pg_class WHERE relname = 'simdb_fingerprints'"
        ).fetchone()[0] / n)
        idx = conn.execute(
            "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
            "WHERE relname = 'simdb_fingerprints' ORDER BY 1"
        ).fetchall()
        out["index_bytes_per_row"] = {k: round(v / n, 1) for k, v in idx}
        out["total_bytes_per_row"] = round(conn.execute("SELECT pg_total_relation_size('simdb_fingerprints')").fetchone()[0] / n)
        if name == "banded":
            alt = {}
            conn.execute("CREATE INDEX alt_gin ON simdb_fingerprints USING gin (bands) WHERE bands IS NOT NULL")
            alt["one_gin_over_bands"] = round(conn.execute("SELECT pg_relation_size('alt_gin')").fetchone()[0] / n, 1)
            conn.execute("DROP INDEX alt_gin")
            total = 0
            for i in range(1, 15):
                conn.execute(f"CREATE INDEX alt_h{i} ON simdb_fingerprints USING hash ((bands[{i}])) WHERE bands IS NOT NULL")
                total += conn.execute(f"SELECT pg_relation_size('alt_h{i}')").fetchone()[0]
                conn.execute(f"DROP INDEX alt_h{i}")
            alt["fourteen_hash_indexes"] = round(total / n, 1)
            conn.commit()
            out["alternatives_bytes_per_row"] = alt
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=30_000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    texts = make_texts(args.rows, args.seed)
    from simdb.embedded import start_server

    with tempfile.TemporaryDirectory(prefix="simdb-bench-storage-") as tmp:
        server = start_server(Path(tmp) / "pgdata", cleanup_mode="delete")
        try:
            for name in ("plain", "banded"):
                print(json.dumps(measure(server.get_uri(), name, texts)), flush=True)
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
