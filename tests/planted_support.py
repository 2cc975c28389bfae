"""The planted collection of the surface tests (tests/test_every_surface.py, tests/test_sql_rule.py):
near-duplicates at several lengths, English and Chinese, whose rule answer and Hamming answer differ.

Each base text (comments of 12-20 words, paragraphs of 60-120 words, Chinese comments of 30 and
paragraphs of 150 characters) gets copies with 1 to 16 changed characters: a comment with a few
typos is a near-duplicate by the rule (Jaccard of shingle sets >= 0.8) while its fingerprint may
lie more than 3 bits away, and a copy with many typos lies within 3 bits and still fails the rule,
so the two answers differ (the tests check it, they do not assume it). Fixed seed: the same texts
every run.
"""

from __future__ import annotations

import random

LATIN = "abcdefghijklmnopqrstuvwxyz"
#: 300 common Chinese characters (U+4E00 block, every 7th one: well spread, all real characters)
HAN = [chr(0x4E00 + 7 * i) for i in range(300)]
TYPOS = (1, 2, 4, 8, 16)


def _typos(rng: random.Random, base: str, n: int, alphabet: list[str] | str) -> str:
    chars = list(base)
    for _ in range(n):
        i = rng.randrange(len(chars))
        while chars[i] == " ":
            i = rng.randrange(len(chars))
        chars[i] = rng.choice(alphabet)
    return "".join(chars)


def planted_texts(seed: int = 27) -> dict[str, str]:
    """{key: text}: for each kind and length, a base text (``KIND-N``) and its copies
    (``KIND-N-typoE``), plus one unrelated text per kind."""
    rng = random.Random(seed)
    words = ["".join(rng.choice(LATIN) for _ in range(rng.randint(3, 8))) for _ in range(400)]
    texts: dict[str, str] = {}
    for kind, lengths in (("comment", (12, 20)), ("para", (60, 120)), ("zh", (30, 150))):
        for n in lengths:
            if kind == "zh":
                base = "".join(rng.choice(HAN) for _ in range(n))
                alphabet: list[str] | str = HAN
            else:
                base = " ".join(rng.choice(words) for _ in range(n))
                alphabet = LATIN
            texts[f"{kind}-{n}"] = base
            for e in TYPOS:
                texts[f"{kind}-{n}-typo{e}"] = _typos(rng, base, e, alphabet)
        texts[f"{kind}-other"] = (
            "".join(rng.choice(HAN) for _ in range(60)) if kind == "zh"
            else " ".join(rng.choice(words) for _ in range(40))
        )
    return texts


def pair_set(pairs) -> set[frozenset]:
    """The unordered key pairs of (key_a, key_b, ...) rows or Pair objects."""
    return {frozenset((p[0], p[1])) for p in pairs}
