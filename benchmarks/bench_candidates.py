"""Which fingerprint finds a verified collection's candidates: recall against the cost.

For each candidate Fingerprinter and radius K, on real paragraphs (the corpora of
``bench_quality.py``, text this project did not write):

- **recall**: of the pairs at exact token-3-gram Jaccard >= 0.8 among near-duplicate families
  (``bench_quality.add_families``: real paragraphs plus edited variants), the share within K
  bits — a pair outside K is never verified, so this caps the recall of every answer;
- **unrelated per text at 1M**: the probability that two unrelated paragraphs (exact Jaccard
  < 0.3) are within K bits, times one million: the candidates a query (or ``pairs()``) must
  verify per text in a collection of 1M texts, which is what near(text) and pairs() cost.

    python benchmarks/bench_candidates.py [--families 3000] [--background 5000]

No database: fingerprints and popcounts in numpy. Appends JSON lines to
benchmarks/results/candidates.jsonl.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_quality as bq  # noqa: E402

from simdb.core import sketch as S  # noqa: E402
from simdb.core.fingerprint import Fingerprinter  # noqa: E402

CANDIDATES = {
    "verified (tokens, stopwords 2/3)": Fingerprinter.preset("verified"),
    "issue 8 (jieba words, stopwords kept)": Fingerprinter(stopwords=False, weighting="tf"),
    "default (jieba words, no stopwords)": Fingerprinter(),
}
KS = (7, 9, 11)


def popcount64(x: np.ndarray) -> np.ndarray:
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return ((x * np.uint64(0x0101010101010101)) >> np.uint64(56)).astype(np.int64)


def unrelated_within(fps: np.ndarray, related: set[int]) -> dict[int, float]:
    """Per K: the share of unrelated pairs (not in ``related``, keys i * n + j) within K bits."""
    n = len(fps)
    counts = dict.fromkeys(KS, 0)
    for s in range(0, n, 500):
        d = popcount64(fps[s : s + 500, None] ^ fps[None, :])
        rows, cols = np.nonzero((d <= max(KS)) & (np.arange(n)[None, :] > np.arange(s, min(s + 500, n))[:, None]))
        for a, b in zip((rows + s).tolist(), cols.tolist()):
            if a * n + b in related or b * n + a in related:
                continue
            dv = int(d[a - s, b])
            for k in KS:
                counts[k] += dv <= k
    pairs = n * (n - 1) / 2
    return {k: c / pairs for k, c in counts.items()}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", type=int, default=3000, help="base paragraphs per language")
    ap.add_argument("--background", type=int, default=5000, help="unrelated paragraphs per language")
    a = ap.parse_args(argv)
    rng = random.Random(13)
    corpora = {"en": bq.dedupe(bq.english_paragraphs()[0]), "zh": bq.dedupe(bq.chinese_paragraphs()[0])}
    out_path = Path(__file__).parent / "results" / "candidates.jsonl"
    for lang, pool in corpora.items():
        texts, _ = bq.add_families(rng.sample(pool, min(a.families, len(pool))), lang, rng)
        n = len(texts)
        truth = np.array([(k // n, k % n) for k in bq.exact_pairs([S.token_shingles(t) for t in texts], min_j=0.8)])
        background = pool[: a.background]
        related = set(bq.exact_pairs([S.token_shingles(t) for t in background], min_j=0.3))
        print(f"{lang}: {n} family texts, {len(truth)} pairs at J >= 0.8; {len(background)} background texts")
        for name, f in CANDIDATES.items():
            fps = np.array([f.fingerprint(t) for t in texts], dtype=np.uint64)
            d = popcount64(fps[truth[:, 0]] ^ fps[truth[:, 1]])
            bg = unrelated_within(np.array([f.fingerprint(t) for t in background], dtype=np.uint64), related)
            row = {"bench": "candidates", "lang": lang, "candidate": name, "truth_pairs": len(truth),
                   **{f"recall_k{k}": float(np.mean(d <= k)) for k in KS},
                   **{f"unrelated_per_text_1m_k{k}": bg[k] * 1e6 for k in KS}}
            print("  " + name + ": " + ", ".join(
                f"K={k} recall {row[f'recall_k{k}']:.3f} unrelated/text@1M {row[f'unrelated_per_text_1m_k{k}']:.1f}"
                for k in KS), flush=True)
            with open(out_path, "a") as fh:
                fh.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
