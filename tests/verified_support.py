"""Corpora and the brute-force judge shared by the verified model-helper tests
(tests/test_model_verified.py for SQLAlchemy, tests/test_django_verified.py for Django)."""

from __future__ import annotations

import random

from simdb.core import sketch as S
from simdb.core.bits import hamming
from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import Verifier
from simdb.core.sketch.bands import text_band_keys

#: the scheme of model rule 1 (rows with simdb_rule NULL), written out: a test fails if it moves
PINNED = "tok3-xxh64-v3"
#: the model rules, written out (scheme, sketch size): a test fails if simdb.core.model_verifier's move
RULE1 = (PINNED, 384)
RULE2 = ("chr4-fmix64-v4", 256)
VOCAB = [f"w{i}" for i in range(30)] + list("中文字词")
K = Verifier().k
#: the models' candidate Fingerprinter, written out: a test fails if simdb.core.model_verifier's moves
CFP = Fingerprinter(tokenizer="tokens", stopwords=2 / 3)


def corpus(rng: random.Random, n_bases: int, max_len: int) -> list[str]:
    """Word texts and planted copies with 0-4 tokens replaced (Jaccard from 1 down past 0.5)."""
    texts = []
    for _ in range(n_bases):
        base = [rng.choice(VOCAB) for _ in range(rng.randint(1, max_len))]
        texts.append(" ".join(base))
        for _ in range(rng.randint(0, 4)):
            copy = list(base)
            for _ in range(rng.randint(0, 4)):
                copy[rng.randrange(len(copy))] = rng.choice(VOCAB)
            texts.append(" ".join(copy))
    texts.append("!!! ???")  # no word characters: no fingerprint, no sketch
    return texts


def sk(text: str, verifier: Verifier | None = None) -> list[int] | None:
    """A text's sketch by the definition (simdb.core.sketch.sketch) with a verifier's size and scheme
    (default: model rule 2's, the rule new rows are written under); None when it has no shingles."""
    scheme, size = RULE2 if verifier is None else (verifier.scheme, verifier.size)
    return S.sketch(text, size, scheme) or None


#: a rule-2 row is a band candidate when it shares this many of its 14 band keys with the query
MIN_SHARED = 2
#: the band scheme of rule-2 rows' keys, written out: a test fails if simdb.core.model_verifier's moves
BAND_SCHEME = "oph-b14r5-m2-v3"


def keys(text: str | None) -> list[int] | None:
    """A text's 14 rule-2 band keys by the definition (simdb.core.sketch.bands, the pinned schemes)."""
    if text is None:
        return None
    got = text_band_keys([text], RULE2[0], BAND_SCHEME)[0]
    return None if got is None else [int(k) for k in got]


def judge(verifier: Verifier, row_fp, row_sk, q_fp, q_sk, k, t, row_keys=None, q_keys=None):
    """(keep, distance, jaccard) of one row for one query, by the definition (docs/verified-models.md):
    a candidate (within the radius K, or, with band keys on both sides, sharing at least MIN_SHARED of
    them) with Jaccard >= t when both have a sketch, else distance <= k."""
    if row_fp is None or q_fp is None:
        return False, None, None
    d = hamming(row_fp, q_fp)
    if row_sk and q_sk:
        j = S.sketch_jaccard(row_sk, q_sk, verifier.size)
        shared = sum(a == b for a, b in zip(row_keys, q_keys)) if row_keys and q_keys else 0
        return (d <= verifier.k or shared >= MIN_SHARED) and j >= t, d, j
    return d <= k, d, None


def flip(rng, fp, bits):
    for b in rng.sample(range(64), bits):
        fp ^= 1 << b
    return fp


def expected_order(answers):
    return sorted(answers, key=lambda a: (a[2] is None, -(a[2] or 0), a[1], a[0]))


#: two texts whose model rule 1 (token 3-gram) Jaccard is exactly 0.8 (11 distinct tokens, the last
#: replaced: 8 shared shingles of 10), within K bits: the threshold is inclusive (>=), so each finds the other.
AT_THRESHOLD = (" ".join(f"w{i}" for i in range(11)), " ".join(f"w{i}" for i in range(10)) + " w29")
#: the same under model rule 2 (character 4-grams): 8 words, the last replaced: 12 shared grams of 15
#: (whole sets: far fewer than 256 grams, so the sketch Jaccard is exact), 5 bits apart.
AT_THRESHOLD_RULE2 = (" ".join(f"w{i}" for i in range(8)), " ".join(f"w{i}" for i in range(7)) + " w29")
#: a 19-word comment and its copy with one typo: found under rule 2 (Jaccard 0.925), not under
#: rule 1 (0.700: the typo breaks 3 of its ~20 token 3-grams); 3 bits apart.
ONE_TYPO = (
    "Thanks for the quick reply, I tried restarting the router twice but the connection still drops every few minutes.",
    "Thanks for the quick reply, I tried restartng the router twice but the connection still drops every few minutes.",
)
#: one-typo copies of 12-14-word comments that an audit of the model helpers found missed by the
#: K = 11 candidates alone: well inside rule 2 (Jaccard 0.81-0.87) but 12-16 bits apart; each pair
#: shares 3-10 of its 14 band keys, so the band candidates find it.
AUDIT_TYPOS = [
    ("Does this charger also work with the older model of the tablet?", "tablet", "atblet"),
    ("Lovely hotel, clean rooms and the staff were very helpful during our stay.", "Lovely", "Loevly"),
    ("Glad I saved the receipt because the handle broke after only two weeks.", "saved", "asved"),
    ("The bus was fifteen minutes late again and nobody told us why this morning.", "minutes", "miuntes"),
]
AUDIT = [(text, text.replace(word, typo, 1)) for text, word, typo in AUDIT_TYPOS]
