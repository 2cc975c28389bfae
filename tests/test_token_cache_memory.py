"""The token cache's memory is bounded by its settings, not by the input.

It used to keep every distinct token, whatever its length, as ``str`` and as ``bytes``: 2,000
posts of one 100 KB hex token each grew a process by 280 MB and more. Now a token longer than
``LONG_TOKEN`` is never kept, and a cache keeps tokens only while its byte count (``nbytes``) is
below ``HASH_CACHE_BYTES``. These tests check that accounting (what it counts, that it covers
what a cache really retains, that the cap holds) and that fingerprints do not depend on what
was kept.
"""

from __future__ import annotations

import random
import tracemalloc

import numpy as np
import pytest
import xxhash
from test_fingerprint import reference

from simdb import Fingerprinter
from simdb.core import sketch
from simdb.core.fingerprint import hashing
from simdb.core.model_verifier import model_fingerprinter
from simdb.dataset.dedup import chunks
from simdb.dataset.defaults import BATCH, BATCH_CHARS
from simdb.dataset.records import Record
from simdb.store import encode


@pytest.fixture(autouse=True)
def _fresh_caches():
    hashing.CACHES.clear()
    yield
    hashing.CACHES.clear()


def _hex_tokens(n: int, chars: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [rng.randbytes(chars // 2).hex() for _ in range(n)]


def test_long_tokens_are_hashed_but_never_kept():
    cache = hashing.TokenCache(0, None)
    blobs = _hex_tokens(50, 100_000, 1) + _hex_tokens(50, hashing.LONG_TOKEN + 2, 2)
    ids = hashing.token_ids(cache, blobs + [b.encode("ascii") for b in blobs])
    assert len(cache) == 0 and cache.nbytes == 0
    expected = [xxhash.xxh64_intdigest(b.encode(), 0) for b in blobs]
    assert cache.hashes[ids].tolist() == expected + expected


def test_nbytes_counts_each_kept_key():
    cache = hashing.TokenCache(0, None)
    words = [f"word{i}" for i in range(1000)]
    hashing.token_ids(cache, [w.encode("ascii") for w in words])  # str kept, and its bytes alias
    assert len(cache) == 2000
    assert cache.nbytes == sum(hashing.sys.getsizeof(k) + hashing.ENTRY_BYTES for k in cache)


def test_nbytes_covers_what_the_cache_retains():
    """tracemalloc: the memory still held once the caller's tokens are gone is what ``nbytes`` counts
    (plus the id arrays, bounded by HASH_CACHE_MAX)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        cache = hashing.TokenCache(0, None)
        rng = random.Random(3)
        words = [rng.randbytes(rng.randint(2, 12)).hex() for _ in range(50_000)]
        hashing.token_ids(cache, [w.encode("ascii") for w in words])
        del words
        retained = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    arrays = cache.hashes.nbytes + cache.is_stop.nbytes
    assert retained <= cache.nbytes + arrays + (256 << 10), (retained, cache.nbytes, arrays)
    assert cache.nbytes <= 2 * retained


def test_the_byte_cap_holds_across_calls(monkeypatch):
    monkeypatch.setattr(hashing, "HASH_CACHE_BYTES", 200_000)
    fp = Fingerprinter()
    rng = random.Random(4)
    seen = set()
    for _ in range(60):  # ~17 times the cap of distinct words, in posts of 200 words
        fp.fingerprint(" ".join(rng.randbytes(6).hex() for _ in range(200)))
        for cache in hashing.CACHES.values():
            assert cache.nbytes <= hashing.HASH_CACHE_BYTES
            seen.add(id(cache))
    assert len(seen) > 1  # a full cache was replaced, not grown


@pytest.mark.parametrize("cap", [0, 3_000, 1 << 30])
@pytest.mark.parametrize("weighting", ["tf", "binary"])
def test_fingerprints_do_not_depend_on_what_is_kept(monkeypatch, cap, weighting):
    """Tokens not kept get a new id at each lookup: binary weighting still counts each distinct one once."""
    monkeypatch.setattr(hashing, "HASH_CACHE_BYTES", cap)
    long_word = "x" * (hashing.LONG_TOKEN + 5)
    texts = [f"alpha{i} {long_word} beta {long_word} alpha{i} gamma{i % 3} beta" for i in range(40)]
    texts += ["中文 " + long_word + " 中文 " + long_word, long_word]
    fp = Fingerprinter(weighting=weighting)
    expected = [reference(fp.features(t)) for t in texts]
    assert [fp.fingerprint(t) for t in texts] == expected
    hashing.CACHES.clear()
    assert fp.many(texts) == expected
    chars = Fingerprinter(tokenizer="chars", weighting=weighting)
    hashing.CACHES.clear()
    assert [chars.fingerprint(t) for t in texts] == [reference(chars.features(t)) for t in texts]


# --------------------------------------------------------------------------- batches bounded by text size
# 800 records of 2 MiB were one add_many chunk (1.6 GB held at once; `simdb add` peaked at 3.4 GB) and one
# dedup batch, held twice (6.6 GB): chunks, pool tasks and dedup batches also end at a number of characters.


def test_add_many_chunks_and_pool_tasks_end_at_a_size():
    big = 3_000_000
    items = [(f"k{i}", "x" * big) for i in range(7)] + [{"key": "s", "text": "short"}]
    chunks = list(encode._numbered_chunks(iter(items), encode.CHUNK_ROWS))
    per_chunk = encode.CHUNK_CHARS // big
    assert [base for base, _ in chunks] == list(range(0, 8, per_chunk))
    assert all(sum(len(t[1] if isinstance(t, tuple) else t["text"]) for t in c) <= encode.CHUNK_CHARS
               for _, c in chunks)
    tasks = list(encode._pool_tasks(iter(chunks), encode.POOL_TASK_ROWS))
    assert [base for base, _ in tasks] == list(range(8)) and all(len(t) == 1 for _, t in tasks)
    rows = [(f"r{i}", "y") for i in range(45_000)]  # short texts: cut by count, as before
    assert [len(c) for _, c in encode._numbered_chunks(iter(rows), encode.CHUNK_ROWS)] == [20_000, 20_000, 5_000]


def test_dedup_batches_end_at_a_size():
    recs = [(None, Record(f"k{i}", "z" * 6_000_000, {}, f"in:{i}")) for i in range(7)]
    batches = list(chunks(iter(recs), BATCH, BATCH_CHARS, lambda p: p[1].text))
    assert [len(b) for b in batches] == [3, 3, 1]
    assert [len(b) for b in chunks(iter(range(12_000)), BATCH)] == [BATCH, BATCH, 12_000 - 2 * BATCH]


def test_a_long_texts_token_sketch_finds_the_words_its_fingerprint_cached(monkeypatch):
    """A text of more tokens than a cache holds ids (``HASH_CACHE_MAX``) but few distinct words, as a
    5 MB post: its token 3-gram sketch (the verified models' rule 1) finds in the cache the words the
    candidate fingerprint of the same text has just hashed. It used to ask the cache for room for every
    token, so it replaced the cache and hashed every word again (a third of that sketch). Same sketch."""
    rng = random.Random(3)
    words = [f"w{rng.randrange(10**9)}" for _ in range(3000)]
    text = " ".join(rng.choices(words, k=hashing.HASH_CACHE_MAX + 10_000))
    model_fingerprinter().fingerprint(text)
    misses: list = []
    real = hashing.TokenCache.__missing__

    def counted(self, key):
        misses.append(key)
        return real(self, key)

    monkeypatch.setattr(hashing.TokenCache, "__missing__", counted)
    got = sketch.sketch(text, 384, "tok3-xxh64-v3")
    assert misses == []
    hashes = np.array([xxhash.xxh64_intdigest(t.encode("utf-8"), 0) for t in sketch.tokens(text)], dtype=np.uint64)
    assert got == np.unique(sketch.shingle_values(hashes))[:384].tolist()
