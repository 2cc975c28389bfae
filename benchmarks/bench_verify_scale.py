"""Verified vs plain collections at scale (issue 13's speed targets): load, near(text), pairs().

The real corpora on this machine hold ~15,000 paragraphs, too few for 1M distinct rows, so
each text here is 3-6 real sentences drawn from different paragraphs (70 % English, 30 %
Chinese): real words, real sentence statistics, and as in real collections, texts that share
a sentence or two. 1 % of the rows are planted copies of another row with 1-3 words (or Han
characters) replaced (exact truth: each copy's full-set Jaccard with its original). In one run, in one fresh database:

- ``add_many`` texts/s into a plain (``verify=False``) and a verified (default) collection,
  and the ratio (target: verified >= 0.8x plain);
- table + index bytes per row of both;
- ``near(text)`` p50 / p99 over planted copies, both collections (target: verified <= 1 ms);
- ``pairs()`` of the verified collection: seconds (target: <= 60 s at 1M), pairs found, and
  the recall of the planted pairs whose Jaccard is >= 0.8.

    python benchmarks/bench_verify_scale.py --rows 1000000

Uses $SIMDB_DATABASE_URL's server, else an embedded one. Appends one JSON line to
benchmarks/results/verify_scale.jsonl.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).parent))
import bench_quality as bq  # noqa: E402
from bench_verify import fresh_db  # noqa: E402
from server import bench_server  # noqa: E402

from simdb.core import sketch as S  # noqa: E402
from simdb.index import SimhashIndex  # noqa: E402


def synthetic(n: int, seed: int = 7) -> tuple[list[str], list[tuple[int, int]]]:
    """``n`` texts, each 3-6 real sentences drawn at random (English, or Chinese for 30 % of the
    texts) from different paragraphs, and the planted pairs (original, copy): 1 % of the rows
    are copies of an earlier row with 1-3 words (or Han characters) replaced."""
    rng = np.random.default_rng(seed)
    en = [x for p in bq.english_paragraphs()[0] for x in bq._sentences(p, False) if len(x.split()) >= 5]
    zh = [x for p in bq.chinese_paragraphs()[0] for x in bq._sentences(p, True) if len(x) >= 12]
    words = [w for x in en[:5000] for w in x.split()]
    hans = [c for x in zh[:5000] for c in x if "\u4e00" <= c <= "\u9fff"]
    texts: list[str] = []
    for _ in range(n):
        cjk = rng.random() < 0.3
        pool = zh if cjk else en
        picks = rng.integers(0, len(pool), int(rng.integers(3, 7)))
        texts.append(("" if cjk else " ").join(pool[i] for i in picks.tolist()))
    return texts_with_copies(texts, rng, words, hans)


def sampled(n: int, seed: int = 7) -> tuple[list[str], list[tuple[int, int]]]:
    """``n`` texts whose words (English, 70 %) or characters (Chinese, 30 %) are drawn
    independently with the real corpora's frequencies, at the real paragraphs' lengths, and the
    planted pairs as in :func:`synthetic`.

    Why a second corpus: a SimHash fingerprint depends only on a text's bag of weighted tokens,
    so bags with real frequencies (stopwords and all) place unrelated texts in SimHash space as
    real unrelated texts of those lengths are placed, without the shared sentences of
    :func:`synthetic` (the dense case). Real collections lie between the two."""
    rng = np.random.default_rng(seed)
    en_paras = [p.split() for p in bq.english_paragraphs()[0]]
    zh_paras = [[c for c in p if not c.isspace()] for p in bq.chinese_paragraphs()[0]]
    en_lens = np.array([len(p) for p in en_paras if len(p) >= 40])
    zh_lens = np.array([len(p) for p in zh_paras if len(p) >= 80])

    def vocabulary(paras):
        words, counts = np.unique(np.array([w for p in paras for w in p], dtype=object), return_counts=True)
        return words, counts / counts.sum()

    en_words, en_p = vocabulary(en_paras)
    zh_chars, zh_p = vocabulary(zh_paras)
    cjk = rng.random(n) < 0.3
    lens = np.where(cjk, rng.choice(zh_lens, n), rng.choice(en_lens, n))
    texts: list[str] = [""] * n
    for flag, words, p, sep in ((False, en_words, en_p, " "), (True, zh_chars, zh_p, "")):
        rows = np.flatnonzero(cjk == flag)
        ids = rng.choice(len(words), size=int(lens[rows].sum()), p=p)
        drawn = words[ids].tolist()
        ends = np.cumsum(lens[rows]).tolist()
        start = 0
        for r, end in zip(rows.tolist(), ends):
            texts[r] = sep.join(drawn[start:end])
            start = end
    return texts_with_copies(texts, rng, list(en_words[:5000]), [c for c in zh_chars if "\u4e00" <= c <= "\u9fff"])


def sparse(n: int, seed: int = 7) -> tuple[list[str], list[tuple[int, int]]]:
    """The real paragraphs themselves (English and Chinese, deduplicated), with 1 % planted copies
    as in :func:`synthetic`; ``main`` fills the collections up to ``n`` rows with uniform random
    fingerprints (rows without text). Why: the only 1M-row collection this machine can hold whose
    texts are as sparse in SimHash space as real ones: it measures the search's fixed cost at 1M
    rows (the 548 probes of K = 11) with real texts' candidates, which the dense corpora hide."""
    rng = np.random.default_rng(seed)
    texts = bq.dedupe(bq.english_paragraphs()[0]) + bq.dedupe(bq.chinese_paragraphs()[0])
    words = [w for p in texts[:3000] for w in p.split()]
    hans = [c for p in texts for c in p if "\u4e00" <= c <= "\u9fff"]
    return texts_with_copies(texts[: min(n, len(texts))], rng, words, hans)


CORPORA = {"sentences": synthetic, "sampled": sampled, "sparse": sparse}


def fill(ix: SimhashIndex, rows: int, seed: int = 11) -> None:
    """Rows of uniform random fingerprints (no text) up to ``rows`` rows in the collection."""
    n = rows - len(ix)
    if n > 0:
        rng = np.random.default_rng(seed)
        fps = rng.integers(0, 2**64, n, dtype=np.uint64, endpoint=False).tolist()
        ix.add_many({"key": f"fill{i}", "fp": fp} for i, fp in enumerate(fps))


def texts_with_copies(texts: list[str], rng, words: list[str], hans: list[str]) -> tuple[list[str], list[tuple[int, int]]]:
    """The texts with 1 % of the rows replaced by copies of an earlier row with 1-3 words (or
    Han characters) replaced, and the planted pairs (original, copy)."""
    n = len(texts)
    planted = []
    for c in rng.choice(np.arange(1, n), size=n // 100, replace=False).tolist():
        orig = int(rng.integers(0, c))
        t = texts[orig]
        for _ in range(int(rng.integers(1, 4))):
            if any("\u4e00" <= ch <= "\u9fff" for ch in t[:50]):
                i = int(rng.integers(0, len(t)))
                t = t[:i] + hans[int(rng.integers(0, len(hans)))] + t[i + 1 :]
            else:
                w = t.split(" ")
                w[int(rng.integers(0, len(w)))] = words[int(rng.integers(0, len(words)))]
                t = " ".join(w)
        texts[c] = t
        planted.append((orig, c))
    return texts, planted


def load(url: str, name: str, texts: list[str], **kw) -> tuple[SimhashIndex, float]:
    ix = SimhashIndex(url, name, **kw)
    t0 = time.perf_counter()
    ix.add_many((str(i), t) for i, t in enumerate(texts))
    return ix, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--no-pairs", dest="pairs", action="store_false")
    ap.add_argument("--corpus", choices=sorted(CORPORA), default="sentences",
                    help="sentences: 3-6 real sentences a text (dense); sampled: real word frequencies (dense); "
                         "sparse: the real paragraphs plus uniform fingerprints up to --rows (see each function)")
    a = ap.parse_args(argv)
    log = lambda s: print(s, flush=True)  # noqa: E731
    with bench_server() as url:
        t0 = time.perf_counter()
        texts, planted = CORPORA[a.corpus](a.rows)
        log(f"{len(texts)} texts ({a.rows} rows), {len(planted)} planted copies, generated in {time.perf_counter() - t0:.0f} s")
        # each collection in a database of its own: a load into an empty table (the bulk path)
        # for both, and each table's size is that collection's
        out: dict = {"bench": "verify_scale", "rows": a.rows, "corpus": a.corpus}
        plain, t_plain = load(fresh_db(url), "plain", texts, verify=False)
        log(f"plain load {len(texts) / t_plain:,.0f} texts/s")
        ver, t_ver = load(fresh_db(url), "verified", texts)
        log(f"verified load {len(texts) / t_ver:,.0f} texts/s ({t_plain / t_ver:.2f}x plain)")
        out.update(plain_texts_per_s=len(texts) / t_plain, verified_texts_per_s=len(texts) / t_ver,
                   load_ratio=t_plain / t_ver)
        if len(texts) < a.rows:  # sparse: uniform fingerprints up to --rows (not part of the load rates)
            fill(plain, a.rows)
            fill(ver, a.rows)
        for ix, label in ((plain, "plain"), (ver, "verified")):
            with ix.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                c.execute(text("VACUUM ANALYZE simdb_fingerprints"))
                total = c.execute(text("SELECT pg_total_relation_size('simdb_fingerprints')")).scalar()
                sk = c.execute(text("SELECT coalesce(sum(pg_column_size(shingles)), 0) FROM simdb_fingerprints")).scalar()
            out[f"{label}_bytes_per_row"] = total / a.rows
            out[f"{label}_sketch_bytes_per_row"] = sk / a.rows
        log(f"bytes per row (table + indexes): plain {out['plain_bytes_per_row']:.0f}, verified "
            f"{out['verified_bytes_per_row']:.0f} ({out['verified_bytes_per_row'] / out['plain_bytes_per_row']:.2f}x)")
        rng = np.random.default_rng(3)
        qs = [texts[c] for _, c in (planted[i] for i in rng.choice(len(planted), min(a.queries, len(planted)), replace=False))]
        for ix, label in ((plain, "plain"), (ver, "verified")):
            for q in qs[:50]:
                ix.near(q)
            lat = []
            for q in qs:
                t1 = time.perf_counter()
                ix.near(q)
                lat.append(time.perf_counter() - t1)
            out[f"{label}_near_p50_ms"] = float(np.percentile(lat, 50) * 1000)
            out[f"{label}_near_p99_ms"] = float(np.percentile(lat, 99) * 1000)
            log(f"{label} near(text) p50 {out[f'{label}_near_p50_ms']:.3f} ms, p99 {out[f'{label}_near_p99_ms']:.3f} ms")
        if a.pairs:
            t2 = time.perf_counter()
            found = {(min(int(p.key_a), int(p.key_b)), max(int(p.key_a), int(p.key_b))) for p in ver.pairs()}
            out["verified_pairs_s"] = time.perf_counter() - t2
            out["verified_pairs"] = len(found)
            true = [(o, c) for o, c in planted
                    if S.jaccard(S.token_shingles(texts[o]), S.token_shingles(texts[c])) >= 0.8]
            out["planted_pairs_j08"] = len(true)
            out["planted_recall"] = sum((min(o, c), max(o, c)) in found for o, c in true) / max(1, len(true))
            log(f"verified pairs(): {out['verified_pairs_s']:.1f} s, {len(found)} pairs, planted recall "
                f"{out['planted_recall']:.3f} of {len(true)}")
        plain.close()
        ver.close()
        log(json.dumps(out))
        with open(Path(__file__).parent / "results" / "verify_scale.jsonl", "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
