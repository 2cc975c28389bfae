"""SimhashIndex.near_within: near-duplicates among a list of texts, in memory, against the store.

The oracle is the store itself: the same texts stored in a banded collection and asked with
``near`` one by one give, for each text, the same Matches (less its own row) as near_within.
Also: ``simdb dedup``'s in-memory decision of a batch changes nothing in the collection for a
record it removes.
"""

from __future__ import annotations

import random

import pytest
from cli_support import SAMPLE

from simdb import SimhashIndex, dedup_records
from simdb.errors import InvalidArgumentError
from simdb.index.within import near_within

BASES = [p.read_text(encoding="utf-8") for p in sorted((SAMPLE / "originals").glob("*.txt"))[:8]]
VOCAB = sorted({w for b in BASES for w in b.split()})


def _texts(seed: int, n: int) -> list[str]:
    """Copies, one- to eight-word edits, halves of two texts glued (band collisions that fail the
    rule), very short texts (few or no shingles), and empty texts."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        roll = rng.random()
        base = rng.choice(BASES)
        words = base.split()
        if roll < 0.05:
            out.append("")
        elif roll < 0.12:
            out.append(" ".join(rng.sample(VOCAB, rng.choice([1, 2]))))
        elif roll < 0.3:
            other = rng.choice(BASES).split()
            out.append(" ".join(words[: len(words) // 2] + other[len(other) // 2:]))
        else:
            for _ in range(rng.choice([0, 1, 2, 8])):
                words[rng.randrange(len(words))] = rng.choice(VOCAB)
            out.append(" ".join(words))
    return out


def _as_tuples(matches) -> list[tuple]:
    return [(m.key, m.fp, m.distance, m.jaccard, m.meta) for m in matches]


@pytest.mark.parametrize("options", [{}, {"min_jaccard": 0.85}, {"k": 6}])
def test_near_within_answers_as_the_store_would(database_url, collection_name, options):
    texts = _texts(5, 90)
    keys = [f"t{i:03d}" for i in range(len(texts))]
    metas = [{"n": i} for i in range(len(texts))]
    with SimhashIndex(database_url, collection=collection_name) as ix:
        assert ix.bands  # the default collection is banded
        within = ix.near_within(texts, keys, metas=metas, **options)
        ix.add_many({"key": key, "text": t, "meta": m} for key, t, m in zip(keys, texts, metas))
        stored = [[m for m in ix.near(t, **options) if m.key != key] for key, t in zip(keys, texts)]
        ix.drop()
    assert sum(map(len, stored)) > len(texts) // 2  # near-duplicates to find
    assert [_as_tuples(w) for w in within] == [_as_tuples(s) for s in stored]


def test_near_within_checks_its_arguments(database_url, collection_name):
    with SimhashIndex(database_url, collection=collection_name) as ix:
        with pytest.raises(InvalidArgumentError, match="2 texts, 1 keys"):
            ix.near_within(["a b c", "d e f"], ["x"])
        ix.drop()
    with SimhashIndex(database_url, collection=collection_name + "-h", verify=False) as plain:
        with pytest.raises(InvalidArgumentError, match="banded"):
            plain.near_within(["a b c"], ["x"])
        plain.drop()


def test_incremental_dedup_leaves_a_removed_records_stored_row_alone(database_url, collection_name):
    """A record removed as a near-duplicate of an earlier record of its batch does not touch the
    stored row of its key (it used to replace it, then delete it: the row was lost)."""
    far, text = BASES[0], BASES[1]
    copy = text.replace(text.split()[3], "zebra", 1)
    with SimhashIndex(database_url, collection=collection_name) as ix:
        ix.add("old", far)
        before = ix.get("old")
        log = []
        kept = list(dedup_records([{"id": "new", "text": text}, {"id": "old", "text": copy}], index=ix,
                                  on_removed=log.append))
        assert [r["id"] for r in kept] == ["new"] and [(r.key, r.kept_key) for r in log] == [("old", "new")]
        assert ix.get("old") == before and len(ix) == 2
        ix.drop()


def test_a_text_without_a_sketch_is_found_by_distance_as_a_sketchless_row(database_url, collection_name):
    """A row without a sketch is a candidate of every query within the Hamming radius, and a
    query without band keys has no band candidates (BAND_NEAR_SQL's two parts)."""
    with SimhashIndex(database_url, collection=collection_name) as ix:
        (fp, sketch, keys), = ix.rule.texts_features(ix.fingerprinter, [BASES[0]])
        verifier = ix.rule.verifier
        ix.drop()
    got = near_within([(fp, None, None), (fp ^ 0b101, sketch, keys), (fp ^ 0b1111, sketch, keys)],
                      ["bare", "a", "b"], [None, None, None], verifier, 0.8, 3)
    assert [[m.key for m in ms] for ms in got] == [[], ["b", "bare"], ["a"]]  # b: 4 bits from bare
    assert (got[1][1].distance, got[1][1].jaccard) == (2, None) and got[2][0].jaccard == 1.0


def test_prepared_features_are_used_and_answer_the_same(database_url, collection_name, monkeypatch):
    """prepare() (simdb dedup's reading thread) computes the features a coming near_many /
    near_within takes: the call tokenizes nothing, and answers as without it."""
    texts = _texts(9, 40)
    with SimhashIndex(database_url, collection=collection_name) as ix:
        ix.add_many((f"s{i}", t) for i, t in enumerate(texts[:20]))
        expected = ix.near_many(texts[20:]), ix.near_within(texts[20:], [f"q{i}" for i in range(20)])
        ix.prepare(texts[20:] + ["x" * 10])
        ix.prepare(["another batch"])  # the last two calls are held
        ix._feature_memo = {}
        monkeypatch.setattr(ix.rule, "texts_features", lambda *a: pytest.fail("tokenized again"))
        got = ix.near_many(texts[20:]), ix.near_within(texts[20:], [f"q{i}" for i in range(20)])
        ix.drop()
    assert [[_as_tuples(a) for a in part] for part in got] == [[_as_tuples(a) for a in part] for part in expected]
    assert any(expected[0])
