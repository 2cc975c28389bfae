"""Verified collections (issue 13): quality, storage and speed against plain k=3, in one run.

Corpora: the real English / Chinese paragraphs of ``bench_quality.py`` (text already
on the machine, not written by this project), and mixed texts (a Chinese paragraph's
sentences interleaved with an English paragraph's).

1. Planted 1 % edits: for paragraphs of >= 80 words (English) / >= 150 Han characters
   (Chinese; mixed: both halves), a copy with 1 % of its tokens (words or Han
   characters) replaced by random tokens of the same kind. Bases are loaded, copies
   queried with ``near(copy)``. Recall: the base is among the answers. Precision: the
   share of answers whose exact Jaccard of full token-3-gram sets is >= 0.8 (the rule).
   Plain k=3 (default Fingerprinter, Hamming only) answers the same queries for comparison.
2. F1 at J >= 0.8 with exact all-pairs truth: near-duplicate families of
   ``bench_quality.add_families``; ``pairs()`` of a verified collection against every
   pair with exact full-set Jaccard >= 0.8 (sparse intersection counts).
3. Storage bytes per row (table + indexes), ``add_many`` texts/s, ``near(text)`` p50 and
   ``pairs()`` seconds: the same texts in a fresh database per variant (plain, verified; the
   issue-8 jaccard=True variant was retired with its store by issue 28).

    python benchmarks/bench_verify.py [--n 3000] [--speed-n 20000]

Uses $SIMDB_DATABASE_URL's server, else the embedded one. Moderate sizes: the machine
is shared.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import sys
import time
import uuid
from pathlib import Path

import numpy as np
from sqlalchemy import create_engine, text

sys.path.insert(0, str(Path(__file__).parent))
import bench_quality as bq  # noqa: E402
from server import bench_server  # noqa: E402

from simdb.core import sketch as S  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402
from simdb.store.migrate import migrate  # noqa: E402

_HAN = re.compile("[\u4e00-\u9fff]")
_TOK = re.compile(S.TOKEN_PATTERN)


def edit_tokens(t: str, rate: float, rng: random.Random, words: list[str], hans: list[str]) -> str:
    spans = [m.span() for m in _TOK.finditer(t)]
    n = max(1, round(rate * len(spans)))
    out = list(t)
    for a, b in sorted(rng.sample(spans, min(n, len(spans))), reverse=True):
        rep = rng.choice(hans) if _HAN.match(t[a]) else rng.choice(words)
        out[a:b] = list(rep)
    return "".join(out)


def corpora(rng: random.Random, n: int):
    en = bq.dedupe(bq.english_paragraphs()[0])
    zh = bq.dedupe(bq.chinese_paragraphs()[0])
    long_en = [p for p in en if len(p.split()) >= 80]
    long_zh = [p for p in zh if len(_HAN.findall(p)) >= 150]
    mixed = []
    for _ in range(n):
        a = bq._sentences(rng.choice(long_zh), True)
        b = bq._sentences(rng.choice(long_en), False)
        mixed.append(" ".join(x for pair in zip(a, b) for x in pair) + " ".join(a[len(b):] + b[len(a):]))
    rng.shuffle(long_en)
    rng.shuffle(long_zh)
    return {"en": long_en[:n], "zh": long_zh[:n], "mixed": mixed}, en, zh


def fresh_db(server_url: str) -> str:
    from sqlalchemy.engine import make_url

    name = "simdb_bench_" + uuid.uuid4().hex[:10]
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    migrate(url)
    return url


def planted(url: str, docs: dict, rng: random.Random, log) -> dict:
    words = [w for ps in docs.values() for p in ps[:300] for w in re.findall(r"[a-z]+", p.lower())]
    hans = [c for ps in docs.values() for p in ps[:300] for c in _HAN.findall(p)]
    res = {}
    for lang, bases in docs.items():
        copies = [edit_tokens(b, 0.01, rng, words, hans) for b in bases]
        name = f"planted-{lang}-{uuid.uuid4().hex[:6]}"
        with SimhashIndex(url, name) as v, SimhashIndex(url, name + "-plain", verify=False) as p:
            v.add_many((f"b{i}", t) for i, t in enumerate(bases))
            p.add_many((f"b{i}", t) for i, t in enumerate(bases))
            full = [set(S.token_shingles(t)) for t in bases]
            found = answers = good = found_plain = 0
            for i, c in enumerate(copies):
                ms = v.near(c)
                cs = set(S.token_shingles(c))
                found += any(m.key == f"b{i}" for m in ms)
                for m in ms:
                    answers += 1
                    fs = full[int(m.key[1:])]
                    good += len(fs & cs) / len(fs | cs) >= 0.8
                found_plain += any(m.key == f"b{i}" for m in p.near(c, k=3))
        res[lang] = {"n": len(bases), "recall": found / len(bases), "precision": good / answers if answers else 1.0,
                     "recall_plain_k3": found_plain / len(bases)}
        log(f"planted 1% {lang}: {res[lang]}")
    return res


def f1_families(url: str, paras: list[str], lang: str, rng: random.Random, log) -> dict:
    texts, _ = bq.add_families(paras, lang, rng)
    truth_j = bq.exact_pairs([S.token_shingles(t) for t in texts], min_j=0.8)
    n = len(texts)
    truth = {(k // n, k % n) for k in truth_j}
    with SimhashIndex(url, f"fam-{lang}-{uuid.uuid4().hex[:6]}") as v:
        v.add_many((f"{i}", t) for i, t in enumerate(texts))
        pred = {tuple(sorted((int(p.key_a), int(p.key_b)))) for p in v.pairs()}
    p, r, f = bq.prf(pred, truth)
    out = {"texts": n, "truth_pairs": len(truth), "precision": p, "recall": r, "f1": f}
    log(f"families {lang}: {out}")
    return out


def speed(server_url: str, texts: list[str], nq: int, log) -> dict:
    out = {}
    for variant, kw in [("plain", {"verify": False}), ("verified", {})]:
        url = fresh_db(server_url)
        eng = create_engine(url, isolation_level="AUTOCOMMIT")
        with SimhashIndex(url, "s", **kw) as ix:
            t0 = time.perf_counter()
            ix.add_many((f"{i}", t) for i, t in enumerate(texts))
            load = time.perf_counter() - t0
            with eng.connect() as c:
                c.execute(text("VACUUM ANALYZE"))
                size = c.execute(text("SELECT pg_total_relation_size('simdb_fingerprints')")).scalar()
            qs = random.Random(5).sample(texts, nq)
            lat = []
            for q in qs:
                t1 = time.perf_counter()
                ix.near(q)
                lat.append(time.perf_counter() - t1)
            t2 = time.perf_counter()
            npairs = sum(1 for _ in ix.pairs())
            pairs_s = time.perf_counter() - t2
        eng.dispose()
        out[variant] = {"rows": len(texts), "texts_per_s": len(texts) / load, "bytes_per_row": size / len(texts),
                        "near_p50_ms": float(np.percentile(lat, 50) * 1000), "pairs_s": pairs_s, "pairs": npairs}
        log(f"speed {variant}: {out[variant]}")
    for v in ("verified",):
        out[v]["load_ratio_vs_plain"] = out[v]["texts_per_s"] / out["plain"]["texts_per_s"]
        out[v]["bytes_ratio_vs_plain"] = out[v]["bytes_per_row"] / out["plain"]["bytes_per_row"]
    log(f"ratios: verified load {out['verified']['load_ratio_vs_plain']:.2f}x, storage "
        f"{out['verified']['bytes_ratio_vs_plain']:.2f}x")
    return out


def use_sketch_size(size: int) -> None:
    """New collections of this run keep ``size`` values a row: the Verifier's default is the one
    knob (a collection records its size in its config, and every comparison reads it from there)."""
    defaults = list(S.Verifier.__init__.__defaults__)
    defaults[[f.name for f in dataclasses.fields(S.Verifier)].index("size")] = size
    S.Verifier.__init__.__defaults__ = tuple(defaults)
    assert S.Verifier().size == size


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000, help="planted bases per language")
    ap.add_argument("--families", type=int, default=3000, help="base paragraphs per language for the F1 run")
    ap.add_argument("--speed-n", type=int, default=20000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--only", choices=["planted", "f1", "speed"], default=None)
    ap.add_argument("--sketch", type=int, default=None,
                    help="sketch size of the new collections (default: simdb's); the sketch-size table of "
                         "docs/near-duplicates.md compares 128, 256 and 384")
    a = ap.parse_args(argv)
    if a.sketch is not None:
        use_sketch_size(a.sketch)
    log = lambda s: print(s, flush=True)  # noqa: E731
    rng = random.Random(13)
    with bench_server() as url:
        docs, en, zh = corpora(rng, a.n)
        db = fresh_db(url)
        if a.only in (None, "planted"):
            planted(db, docs, rng, log)
        if a.only in (None, "f1"):
            f1_families(db, rng.sample(en, min(a.families, len(en))), "en", rng, log)
            f1_families(db, rng.sample(zh, min(a.families, len(zh))), "zh", rng, log)
        if a.only in (None, "speed"):
            pool = en + zh + docs["mixed"]
            texts = [rng.choice(pool) + f" {i}" for i in range(a.speed_n)]  # distinct rows of real text
            speed(url, texts, a.queries, log)


if __name__ == "__main__":
    main()
