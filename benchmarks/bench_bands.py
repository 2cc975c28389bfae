"""Band-key candidates (issue 26) vs a Hamming-only collection: S-curve, near(text) p50, load rate,
storage per row and pairs(), in one run.

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_bands.py --rows 100000

Data: paragraph-sized English texts as in ``bench_dedup.py`` (first half of one docstring of
``benchmarks/corpus.py`` + second half of another), 10 % of them planted near-duplicates (a copy
of an earlier text with 1-2 words replaced). Two collections, each in its own fresh database of
one embedded server (so that table and index sizes are per variant):

- ``plain``: a Hamming-only collection (``verify=False``);
- ``banded``: a verified collection as created now (band keys, one btree per band).

(The K = 11 Hamming candidates of a verified collection without band keys, this benchmark's third
contender until such collections were retired, are in ``benchmarks/results/bands.jsonl``.)

First, without a database (``--cpu-texts``): CPU microseconds a text of each band scheme's keys
and of a load's encoding per kind of collection (:func:`cpu_costs`).

Per collection: ``add_many`` rows/s (the same texts), bytes/row of the table with its indexes
(``pg_total_relation_size``), then (verified ones) ``near(text)`` p50/p99 over 500 queries (copies
of stored texts with one word replaced, and unrelated texts) with ``SELECT 1`` timed in the same
loop, and ``pairs()`` seconds and count. The S-curve of the band scheme is printed first.

The machine is shared (2 cores, other engineers' tests): figures are noisy; every contender
runs in the same process, one after the other, on the same server.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.corpus import english_pieces, sentence_paragraph  # noqa: E402
from simdb.core.sketch import bands as B  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402


def s_curve_table() -> list[dict]:
    rows = []
    for s in (0.02, 0.05, 0.1, 0.3, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95):
        rows.append({"jaccard": s, "candidate_probability": B.s_curve(s)})
    return rows


def cpu_costs(texts: list[str]) -> dict:
    """CPU microseconds a text (process time, best of 3, no database) of each band scheme's keys
    from the full shingle sets, and of a load's encoding (fingerprints, sketches, keys, COPY rows;
    ``workers=1``) for a plain, a verified and a banded collection of each scheme."""
    from simdb.core import sketch as S
    from simdb.core.fingerprint import Fingerprinter
    from simdb.core.sketch.features import candidate_fingerprinter
    from simdb.store.encode import iter_chunks

    def best(fn) -> float:
        runs = []
        for _ in range(3):
            t = time.process_time()
            fn()
            runs.append(time.process_time() - t)
        return round(1e6 * min(runs) / len(texts), 1)

    sets = S.shingle_sets(texts, S.SCHEME)
    out: dict = {"texts": len(texts), "grams_per_text": round(sum(map(len, sets)) / len(sets))}
    for scheme in B.SCHEMES:
        out[f"keys_us_{scheme}"] = best(lambda s=scheme: B.band_keys_many(sets, s))
    items = [(f"r{i}", t) for i, t in enumerate(texts)]
    ver, cand = S.Verifier(), candidate_fingerprinter()
    for name, fp, v, scheme in [("plain", Fingerprinter(), None, None), ("verified", cand, ver, None),
                                *((f"banded_{s}", cand, ver, s) for s in B.SCHEMES)]:
        out[f"encode_us_{name}"] = best(lambda f=fp, v=v, s=scheme: sum(
            len(b) for _, b in iter_chunks(items, f, verifier=v, band_scheme=s)))
    return out


def make_texts(n: int, seed: int, dup_share: float = 0.1, data: str = "halves") -> list[str]:
    """``n`` texts, ``dup_share`` of them copies of earlier ones with 1-2 words replaced. The others
    (``data``): "halves", the first half of one docstring and the second half of another (~5,200
    docstrings: every half recurs in ~n/5,200 texts, so the band candidates of a query grow with
    ``n``: templated texts, the adversarial case); "sentences", six corpus sentences drawn at
    random (texts that share as little as unrelated real paragraphs)."""
    rng = random.Random(seed)
    pieces = [p.split() for p in english_pieces()]
    vocab = sorted({w for p in pieces[:500] for w in p})
    made: list[str] = []
    out = []
    for _ in range(n):
        if made and rng.random() < dup_share:
            words = rng.choice(made).split()
            for _ in range(rng.choice([1, 2])):
                words[rng.randrange(len(words))] = rng.choice(vocab)
            out.append(" ".join(words))
        else:
            if data == "sentences":
                t = sentence_paragraph(rng)
            else:
                a, b = rng.choice(pieces), rng.choice(pieces)
                t = " ".join(a[: len(a) // 2] + b[len(b) // 2 :])
            made.append(t)
            out.append(t)
    return out


def queries(texts: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    vocab = sorted({w for t in texts[:2000] for w in t.split()})
    qs = []
    for i in range(n):
        if i % 2:  # unrelated
            qs.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(30, 120))))
        else:
            w = rng.choice(texts).split()
            w[rng.randrange(len(w))] = rng.choice(vocab)
            qs.append(" ".join(w))
    return qs


def one(server_url: str, name: str, texts: list[str], qs: list[str], do_pairs: bool) -> dict:
    db = f"bench_bands_{name.replace('-', '_')}"
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
        c.execute(f"CREATE DATABASE {db}")
    url = psycopg.conninfo.make_conninfo(server_url, dbname=db)
    verify = name != "plain"
    url = "postgresql+psycopg:///?" + "&".join(f"{k}={v}" for k, v in psycopg.conninfo.conninfo_to_dict(url).items())
    out: dict = {"collection": name, "rows": len(texts)}
    with SimhashIndex(url, "bench", verify=verify) as ix:
        t0 = time.perf_counter()
        ix.add_many(((f"r{i}", t) for i, t in enumerate(texts)), workers=1)
        out["load_s"] = round(time.perf_counter() - t0, 2)
        out["load_rows_per_s"] = round(len(texts) / (time.perf_counter() - t0))
        conn = ix.connection()
        total = conn.execute("SELECT pg_total_relation_size('simdb_fingerprints')").fetchone()[0]
        out["bytes_per_row"] = round(total / len(texts))
        band_sizes = "SELECT coalesce(sum(pg_relation_size(c.oid)), 0) FROM pg_class c WHERE c.relname LIKE 'ix_simdb_fingerprints_band%%'"
        out["bands_index_bytes_per_row"] = round(conn.execute(band_sizes).fetchone()[0] / len(texts))
        if name == "banded":  # the per-band btrees as a bulk load builds them (sorted, packed pages)
            conn.execute("REINDEX TABLE simdb_fingerprints")
            out["bands_index_bytes_per_row_rebuilt"] = round(conn.execute(band_sizes).fetchone()[0] / len(texts))
            out["bytes_per_row_rebuilt"] = round(
                conn.execute("SELECT pg_total_relation_size('simdb_fingerprints')").fetchone()[0] / len(texts)
            )
        if verify:
            assert ix.bands
            for q in qs[:20]:  # warm
                ix.near(q)
            lat, lat1, found = [], [], 0
            for q in qs:
                t = time.perf_counter()
                found += bool(ix.near(q))
                lat.append(time.perf_counter() - t)
                t = time.perf_counter()
                conn.execute("SELECT 1").fetchone()
                lat1.append(time.perf_counter() - t)
            lat.sort()
            out["near_p50_ms"] = round(1000 * statistics.median(lat), 3)
            out["near_p99_ms"] = round(1000 * lat[int(0.99 * (len(lat) - 1))], 3)
            out["select1_p50_ms"] = round(1000 * statistics.median(lat1), 3)
            out["queries_with_answers"] = found
            if do_pairs:
                t0 = time.perf_counter()
                out["pairs"] = sum(1 for _ in ix.pairs())
                out["pairs_s"] = round(time.perf_counter() - t0, 2)
    with psycopg.connect(server_url, autocommit=True) as c:
        c.execute(f"DROP DATABASE IF EXISTS {db}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", choices=("halves", "sentences"), default="halves", help="see make_texts")
    ap.add_argument("--only", nargs="*", default=["plain", "banded"], choices=["plain", "banded"])
    ap.add_argument("--no-pairs", action="store_true")
    ap.add_argument("--cpu-texts", type=int, default=5000, help="texts of the CPU cost line (0: skip it)")
    args = ap.parse_args()
    print(json.dumps({"band_scheme": B.BAND_SCHEME, "bands": B.BANDS, "rows_per_band": B.ROWS}))
    for row in s_curve_table():
        print(f"  J={row['jaccard']:.2f}  P(candidate)={row['candidate_probability']:.6g}")
    texts = make_texts(args.rows, args.seed, data=args.data)
    if args.cpu_texts:
        print(json.dumps({"cpu_us_per_text": cpu_costs(texts[: args.cpu_texts])}), flush=True)
    qs = queries(texts, args.queries, args.seed)
    from simdb.embedded import start_server  # the CLI's embedded server, in a temporary home

    with tempfile.TemporaryDirectory(prefix="simdb-bench-bands-") as tmp:
        server = start_server(Path(tmp) / "pgdata", cleanup_mode="delete")
        server_url = server.get_uri()
        results = []
        try:
            for name in args.only:
                r = one(server_url, name, texts, qs, not args.no_pairs)
                print(json.dumps(r), flush=True)
                results.append(r)
        finally:
            server.cleanup()
    out = {"command": "benchmarks/bench_bands.py " + " ".join(sys.argv[1:]), "cpus": os.cpu_count(), "results": results}
    with open(ROOT / "benchmarks" / "results" / "bands.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
