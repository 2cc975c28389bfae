"""What the rule guard costs a single-row write (migration simdb_0015_collection_guard).

Every ``add`` / ``update`` / ``add_if_unique`` now carries the version of the collection's rule and
the database checks it under a row lock (:mod:`simdb.store.collection_guard`). This times the
store's upsert of one text's row (band keys and sketch: the default collection) with the guard,
against the same statement without it, in interleaved rounds on one connection of one run::

    .venv/bin/python benchmarks/bench_rule_guard.py --url postgresql+psycopg://... --rows 500 --rounds 8

(``--url`` defaults to ``SIMDB_DATABASE_URL``, then the embedded server.) Reported: the median
microseconds per write of each, and their ratio. Reads are not timed: they carry no guard (a
change of rule reaches them as a ``NOTIFY``, which costs nothing until one is sent).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

from simdb import SimhashIndex
from simdb.store import rows as _rows

TEXT = "the quick brown fox jumps over the lazy dog by the river bank at dawn, " * 3


def unguarded(sql: str) -> str:
    """The upsert as it was before the guard: VALUES instead of SELECT ... WHERE guard."""
    out = sql.replace("SELECT %(c)s::int4", "VALUES (%(c)s::int4").replace(
        " WHERE simdb_collection_unchanged(%(c)s::int4, %(v)s::text) ", ") ")
    assert "VALUES" in out and "unchanged" not in out, out
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default=None, help="database URL (default: SIMDB_DATABASE_URL, else embedded)")
    ap.add_argument("--rows", type=int, default=500, help="writes per round and statement")
    ap.add_argument("--rounds", type=int, default=8, help="interleaved rounds")
    args = ap.parse_args()
    statements = {"guarded": _rows.GUARDED_UPSERT_SQL, "unguarded": unguarded(_rows.GUARDED_UPSERT_SQL)}
    with SimhashIndex(args.url, f"bench_guard_{uuid.uuid4().hex[:8]}") as ix:
        try:
            conn = ix.connection()
            row = ix._row(TEXT, None)
            params = {"c": ix.collection_id, "fp": row.signed, "meta": None, "sh": row.sketch, "bk": row.bands, "tz": None,
                      "v": ix.config_version}
            micros: dict[str, list[float]] = {name: [] for name in statements}
            for rnd in range(args.rounds):
                for name, sql in statements.items():
                    t = time.perf_counter()
                    for i in range(args.rows):
                        conn.execute(sql, {**params, "key": f"{name}-{rnd}-{i}"}, prepare=True)
                    micros[name].append((time.perf_counter() - t) / args.rows * 1e6)
            for name, values in micros.items():
                print(f"{name:10} median {statistics.median(values):7.1f} us per write   rounds: "
                      + " ".join(f"{v:.0f}" for v in values))
            ratio = statistics.median(micros["guarded"]) / statistics.median(micros["unguarded"])
            print(f"guarded / unguarded: {ratio:.3f}")
        finally:
            ix.drop()


if __name__ == "__main__":
    main()
