"""Model rule 2's band keys on a verified host table: what the band arm of the candidate stage costs.

One host table (``bench_model_verified.VerifiedPost``) of the same 7,311 real paragraphs as
``bench_model_verified.py`` (rows written as the flush hook writes them: fingerprint, rule-2 sketch,
band keys), queried with copies having 1 % of their tokens replaced, each query run both ways,
interleaved, on one connection: candidates within ``K = 11`` bits only (``band_keys=None``, the
candidate stage before the keys) and within ``K`` or sharing two band keys (what
``near_duplicates(text)`` runs). Prints p50 / p90 milliseconds (the whole ``session.execute``) and
verified answers a query. ``--custom-plans`` runs the session with ``plan_cache_mode =
force_custom_plan`` (it made the band arm as fast as rendering its keys into the statement does:
simdb.sqlalchemy.verified.band_clause).

    python benchmarks/bench_model_bands.py [--n 10000] [--queries 200] [--custom-plans]

Uses $SIMDB_DATABASE_URL's server, else the embedded one.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

sys.path.insert(0, str(Path(__file__).parent))
import bench_model_verified as B  # noqa: E402
from bench_verify import edit_tokens  # noqa: E402
from server import bench_server  # noqa: E402


def run(url: str, n: int, nq: int, custom: bool, log) -> None:
    rng = random.Random(21)
    texts, en, zh = B.paragraphs(rng, n)
    V = B.VerifiedPost
    eng = create_engine(url)
    B.Base.metadata.create_all(eng)
    with eng.begin() as c:
        c.execute(V.__table__.insert(), [{"id": i, "body": t, **V.simdb_values(t)} for i, t in enumerate(texts)])
        c.execute(text("ANALYZE verified_posts"))
    words = [w for p in en[:2000] for w in p.split()][:20000]
    hans = [ch for p in zh[:500] for ch in p if "\u4e00" <= ch <= "\u9fff"][:5000]
    qs = [edit_tokens(texts[i], 0.01, rng, words, hans) for i in rng.sample(range(len(texts)), min(nq, len(texts)))]
    sigs = [V.query_signature(q) for q in qs]
    times: dict[str, list[float]] = {"K only": [], "K or 2 band keys": []}
    answers = dict.fromkeys(times, 0)
    with Session(eng) as s:
        if custom:
            s.execute(text("SET plan_cache_mode = force_custom_plan"))
        for rnd in range(2):
            for sig in sigs:
                for name, keys in (("K only", None), ("K or 2 band keys", sig.band_keys)):
                    t0 = time.perf_counter()
                    found = len(s.execute(V.near_duplicates_of(sig.fp, sig.sketches, band_keys=keys)).all())
                    times[name].append(time.perf_counter() - t0)
                    answers[name] += found if rnd == 0 else 0
            s.expunge_all()
    log(f"{len(texts)} paragraphs, {len(sigs)} queries x 2 rounds, custom plans: {custom}")
    for name, ts in times.items():
        log(f"{name:17s} p50 {B.pct(ts, .5):.2f} ms  p90 {B.pct(ts, .9):.2f} ms  answers/query {answers[name] / len(sigs):.2f}")
    eng.dispose()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--custom-plans", action="store_true")
    a = ap.parse_args(argv)
    with bench_server() as url:
        run(B.fresh_db(url), a.n, a.queries, a.custom_plans, lambda s: print(s, flush=True))


if __name__ == "__main__":
    main()
