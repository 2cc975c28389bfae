"""How exact is the default's answer? Recall and precision of ``pairs()``'s decision against the rule's
exact all-pairs truth, no database.

Why no database: ``pairs()`` of a banded verified collection keeps a pair when the two rows share the
keys of two bands (:mod:`simdb.core.sketch.bands`, the candidate stage; one in collections banded
before scheme v3: ``--shared 1``) and their stored sketches have Jaccard >= 0.8 (the verification stage); both are pure functions of the texts, computed here the same way
(``Verifier.shingle_set``, ``band_keys_many``, ``Verifier.sketch`` and ``sketch_jaccard``). The
truth is the exact Jaccard of the full character-gram sets (``bench_quality.exact_pairs``), on the
near-duplicate families of ``bench_quality.add_families`` (real paragraphs and edited variants).

Printed per language: the true pairs, the share of them that are candidates (the S-curve's part),
the share the pipeline answers (recall), its precision, and the Hamming k = 3 answer's recall.

    python benchmarks/bench_rule_recall.py --families 1500
"""

from __future__ import annotations

import argparse
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import bench_quality as bq  # noqa: E402

from simdb.core.bits import hamming  # noqa: E402
from simdb.core.sketch import Verifier, sketch_jaccard  # noqa: E402
from simdb.core.sketch.bands import BAND_SCHEME, band_keys_many, min_shared  # noqa: E402
from simdb.core.sketch.features import candidate_fingerprinter  # noqa: E402


def band_candidates(keys: list[np.ndarray | None], shared: int = min_shared(BAND_SCHEME)) -> set[tuple[int, int]]:
    """Every pair (i < j) sharing the keys of at least ``shared`` bands (the default scheme's candidates)."""
    by_key: dict[tuple[int, int], list[int]] = {}
    for i, k in enumerate(keys):
        if k is not None:
            for band, value in enumerate(k.tolist()):
                by_key.setdefault((band, value), []).append(i)
    times = Counter((a, b) for group in by_key.values() for x, a in enumerate(group) for b in group[x + 1 :])
    return {pair for pair, n in times.items() if n >= shared}


def measure(texts: list[str], t: float, shared: int = min_shared(BAND_SCHEME)) -> dict:
    v = Verifier()
    sets = [v.shingle_set(x) for x in texts]
    n = len(texts)
    truth = {(k // n, k % n) for k in bq.exact_pairs([s.tolist() for s in sets], min_j=t)}
    candidates = band_candidates(band_keys_many(sets), shared)
    sketches = [v.sketch(x) for x in texts]
    pred = {p for p in candidates if (j := sketch_jaccard(sketches[p[0]], sketches[p[1]], v.size)) is not None and j >= t}
    fper = candidate_fingerprinter()
    fps = [fper.fingerprint(x, empty=None) for x in texts]
    near3 = {p for p in truth if None not in (fps[p[0]], fps[p[1]]) and hamming(fps[p[0]], fps[p[1]]) <= 3}
    return {
        "texts": n, "true pairs": len(truth),
        "candidate recall": len(truth & candidates) / len(truth),
        "recall": len(truth & pred) / len(truth),
        "precision": len(truth & pred) / len(pred) if pred else 1.0,
        "Hamming k=3 recall": len(near3) / len(truth),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--families", type=int, default=1500, help="base paragraphs per language")
    ap.add_argument("--threshold", type=float, default=0.8)
    ap.add_argument("--shared", type=int, default=min_shared(BAND_SCHEME), help="band keys a candidate shares")
    a = ap.parse_args(argv)
    rng = random.Random(13)
    for lang, paras in (("en", bq.dedupe(bq.english_paragraphs()[0])), ("zh", bq.dedupe(bq.chinese_paragraphs()[0]))):
        texts, _ = bq.add_families(rng.sample(paras, min(a.families, len(paras))), lang, rng)
        res = measure(texts, a.threshold, a.shared)
        print(lang, ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v:,}" for k, v in res.items()),
              flush=True)


if __name__ == "__main__":
    main()
