"""Where the default (banded) collection's load goes: per-phase seconds, client encode alone,
COPY bytes, and per-row bytes by column and index, next to a plain collection (issue 26 / 29).

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_load_profile.py --rows 100000

The texts are ``bench_bands.py``'s paragraphs. For each of ``plain`` (Hamming-only) and ``banded``
(the default), in one process and on one embedded server (a fresh database each):

- ``encode_s``: the client side alone (validation, fingerprints, sketches, band keys, COPY rows;
  :func:`simdb.store.encode.iter_chunks`, ``workers=1``) and ``copy_bytes_per_row``;
- ``copy_server_s``: those rows COPYed again into a temporary table without indexes (the server's
  parsing and writing of the bytes alone);
- ``load_s`` / ``rows_per_s``: ``add_many(workers=1)`` into an empty table (the drop / COPY FREEZE /
  rebuild path), and its ``last_load`` seconds per phase (``copy_direct`` holds the encode, which
  runs while COPY streams, and the server's parsing and writing of the rows);
- ``cpu_us_per_text``: process time a text of the encode's steps (:func:`cpu_steps`);
- per row: heap, average ``pg_column_size`` of the wide columns, and ``pg_relation_size`` of each
  kind of index; then the sketches' ``int4[]`` bytes against a lossless code's least (:func:`sketch_bound`,
  the first 20,000 texts).

The machine is shared: compare the two collections of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_band_storage import _url  # noqa: E402
from benchmarks.bench_bands import make_texts  # noqa: E402
from simdb.core import sketch as S  # noqa: E402
from simdb.core.bits import to_signed  # noqa: E402
from simdb.core.fingerprint import Fingerprinter  # noqa: E402
from simdb.core.sketch import bands as B  # noqa: E402
from simdb.core.sketch.chars import grouped_sketches  # noqa: E402
from simdb.core.sketch.features import candidate_fingerprinter, fingerprints_and_sketches  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402
from simdb.store.encode import (  # noqa: E402
    COLUMNS,
    COPY_OPTIONS,
    HEADER,
    STAGE_COLUMNS,
    TRAILER,
    band_fields,
    encode_rows,
    iter_chunks,
    sketch_fields,
)


def encode_only(name: str, texts: list[str]) -> tuple[dict, list[bytes]]:
    """Seconds (best of 2) and COPY bytes of the client-side encode of a load, no database; and the
    encoded chunks (for :func:`copy_only`)."""
    items = [(f"r{i}", t) for i, t in enumerate(texts)]
    if name == "plain":
        fp, ver, scheme = Fingerprinter(), None, None
    else:
        fp, ver, scheme = candidate_fingerprinter(), S.Verifier(), B.BAND_SCHEME
    runs, chunks = [], []
    for _ in range(2):
        t = time.perf_counter()
        chunks = [b for _, b in iter_chunks(items, fp, verifier=ver, band_scheme=scheme)]
        runs.append(time.perf_counter() - t)
    size = sum(map(len, chunks))
    return {"encode_s": round(min(runs), 2), "copy_bytes_per_row": round(size / len(texts))}, chunks


def cpu_steps(texts: list[str]) -> dict:
    """CPU microseconds a text (process time, best of 3, one process, no database) of a plain
    load's whole encode and of each step of a banded one's: the verified preset's fingerprints,
    the character-gram sketches with and without the band keys' hook, the COPY fields and rows."""

    def best(fn) -> float:
        runs = []
        for _ in range(3):
            t = time.process_time()
            fn()
            runs.append(time.process_time() - t)
        return round(1e6 * min(runs) / len(texts), 1)

    items = [(f"r{i}", t) for i, t in enumerate(texts)]
    fp, ver = candidate_fingerprinter(), S.Verifier()
    out = {"texts": len(texts)}
    out["plain_encode"] = best(lambda: list(iter_chunks(items, Fingerprinter())))
    out["banded_encode"] = best(lambda: list(iter_chunks(items, fp, verifier=ver, band_scheme=B.BAND_SCHEME)))
    out["banded_fingerprints"] = best(lambda: fp.many(texts, empty=None))
    out["banded_sketches"] = best(lambda: grouped_sketches(texts, ver.size))

    def sketches_and_keys() -> None:
        hook = B.block_band_keys(len(texts), B.BAND_SCHEME, ver.scheme)
        grouped_sketches(texts, ver.size, hook)
        if hook is not None:
            hook.keys()

    out["banded_sketches_and_keys"] = best(sketches_and_keys)
    hook = B.block_band_keys(len(texts), B.BAND_SCHEME, ver.scheme)
    fps, sketches = fingerprints_and_sketches(texts, fp, ver, hook)
    keys = hook.keys() if hook is not None else []
    names = [k for k, _ in items]
    signed = [to_signed(f) if f is not None else None for f in fps]
    none = [None] * len(texts)
    out["banded_copy_fields_and_rows"] = best(
        lambda: encode_rows(names, signed, none, sketch_fields(sketches), band_fields(keys), none))
    return out


def sketch_bound(texts: list[str]) -> dict:
    """What the default's sketches take as ``int4[]`` against the least any lossless code of them
    could take, bytes a row on average (no database).

    The bound: a sketch of ``k`` < 256 values is ``k`` distinct values out of 2**32, a full one 256
    values below its largest ``m`` (and ``m`` itself, 32 bits): ``log2 C(range, k)`` bits. Why: it
    says whether a packed representation of the same values could bring storage to 3x plain."""
    values, offsets = grouped_sketches(texts, S.Verifier().size)
    bits = stored = 0.0
    rows = 0
    for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist()):
        k = b - a
        if not k:
            continue
        full = k >= S.Verifier().size
        span = int(values[b - 1]) + 2**31 + 1 if full else 2**32
        bits += (math.lgamma(span + 1) - math.lgamma(k + 1) - math.lgamma(span - k + 1)) / math.log(2) + 32 * full
        stored += 24 + 4 * k  # the int4[] as pg_column_size counts it
        rows += 1
    return {"sketch_int4_bytes_per_row": round(stored / max(rows, 1)),
            "sketch_lossless_bound_bytes_per_row": round(bits / 8 / max(rows, 1))}


def copy_only(server_url: str, chunks: list[bytes], rows: int) -> dict:
    """The server's side of the COPY alone: the chunks already encoded, sent into a temporary table
    of the load's columns without any index (best of 2): what the rows' bytes cost PostgreSQL to
    parse and write, apart from the client's encode and the index builds."""
    runs = []
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"CREATE TEMP TABLE copy_only ({STAGE_COLUMNS})")
        for _ in range(2):
            c.execute("TRUNCATE copy_only")
            t = time.perf_counter()
            with c.cursor().copy(f"COPY copy_only ({COLUMNS}) FROM STDIN ({COPY_OPTIONS})") as cp:
                cp.write(HEADER)
                for data in chunks:
                    cp.write(data)
                cp.write(TRAILER)
            runs.append(time.perf_counter() - t)
    return {"copy_server_s": round(min(runs), 2), "copy_server_us_per_row": round(1e6 * min(runs) / rows, 1)}


def load(server_url: str, name: str, texts: list[str]) -> dict:
    db = f"bench_load_profile_{name}"
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    n = len(texts)
    out: dict = {"collection": name, "rows": n}
    with SimhashIndex(_url(server_url, db), "bench", verify=name != "plain") as ix:
        t0 = time.perf_counter()
        ix.add_many(((f"r{i}", t) for i, t in enumerate(texts)), workers=1)
        out["load_s"] = round(time.perf_counter() - t0, 2)
        out["rows_per_s"] = round(n / out["load_s"])
        last = ix.last_load or {}
        seconds = last.get("seconds", {})
        rebuild = {k: v for k, v in seconds.items() if k.startswith("rebuild_")}
        out["phases_s"] = {k: round(v, 2) for k, v in seconds.items() if not k.startswith("rebuild_")}
        out["phases_s"]["rebuild_block"] = round(sum(v for k, v in rebuild.items() if "_b" in k and "band" not in k), 2)
        out["phases_s"]["rebuild_band"] = round(sum(v for k, v in rebuild.items() if "band" in k), 2)
        out["phases_s"]["rebuild_other"] = round(sum(v for k, v in rebuild.items() if "_b" not in k), 2)
        conn = ix.connection()
        cols = ("key", "fp", "shingles", "bands")
        row = conn.execute("SELECT " + ", ".join(f"avg(pg_column_size({c}))" for c in cols)
                           + " FROM simdb_fingerprints").fetchone()
        out["column_bytes"] = {c: round(float(v or 0), 1) for c, v in zip(cols, row)}
        out["heap_bytes_per_row"] = round(conn.execute(
            "SELECT pg_relation_size('simdb_fingerprints')").fetchone()[0] / n)
        idx = conn.execute("SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
                           "WHERE relname = 'simdb_fingerprints'").fetchall()
        kinds: dict[str, float] = {}
        for iname, size in idx:
            kind = "band" if "band" in iname else "block" if iname[-3:-1] == "_b" else iname
            kinds[kind] = kinds.get(kind, 0) + size / n
        out["index_bytes_per_row"] = {k: round(v, 1) for k, v in sorted(kinds.items())}
        out["total_bytes_per_row"] = round(conn.execute(
            "SELECT pg_total_relation_size('simdb_fingerprints')").fetchone()[0] / n)
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", nargs="*", default=["plain", "banded"])
    ap.add_argument("--cpu-texts", type=int, default=20_000, help="texts of the CPU line (0: skip it)")
    args = ap.parse_args()
    texts = make_texts(args.rows, args.seed)
    from simdb.embedded import start_server

    results = []
    with tempfile.TemporaryDirectory(prefix="simdb-bench-load-profile-") as tmp:
        server = start_server(Path(tmp) / "pgdata", cleanup_mode="delete")
        try:
            for name in args.only:
                encoded, chunks = encode_only(name, texts)
                r = {**load(server.get_uri(), name, texts), **encoded, **copy_only(server.get_uri(), chunks, len(texts))}
                del chunks
                print(json.dumps(r), flush=True)
                results.append(r)
        finally:
            server.cleanup()
    if "banded" in args.only:
        print(json.dumps(bound := sketch_bound(texts[:20_000])), flush=True)
        results.append(bound)
    if args.cpu_texts:
        print(json.dumps(cpu := {"cpu_us_per_text": cpu_steps(texts[: args.cpu_texts])}), flush=True)
        results.append(cpu)
    if len(results) >= 2 and "rows_per_s" in results[1]:
        plain, banded = results[:2]
        print(json.dumps({"load_ratio": round(banded["rows_per_s"] / plain["rows_per_s"], 3),
                          "bytes_ratio": round(banded["total_bytes_per_row"] / plain["total_bytes_per_row"], 2)}))
    out = {"command": "benchmarks/bench_load_profile.py " + " ".join(sys.argv[1:]), "cpus": os.cpu_count(),
           "results": results}
    with open(ROOT / "benchmarks" / "results" / "load_profile.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
