"""What a verified collection stores per text, computed in one pass: the candidate fingerprint
and the bottom-k sketch of the same text.

Pure (no database). Why a module of its own: loading a verified collection costs the
fingerprint *and* the sketch of every text, and both start the same way. For the common case
(the candidate Fingerprinter, the ``tok3-xxh64-v3`` scheme, an ASCII text without ``_``) the
fingerprint's words (``\\w+`` of the lower-cased text) *are* the sketch's tokens and the
fingerprint core already hashed them (xxh64, seed 0, through the shared token cache), so the
text is tokenized and its words hashed once, and the sketch is a few vector operations on
those hashes. Every other text (non-ASCII, ``_``, another Fingerprinter or scheme, very long
texts with their own bounded-memory path) takes the two computations apart. Either way the
values are those of ``Fingerprinter.fingerprint`` and ``Verifier.sketch``; a property test
checks it.

The character-gram scheme of new collections (``chr4-fmix64-v4``, :mod:`simdb.core.sketch.chars`)
shares nothing with the fingerprint's tokens but the normalisation: its sketches are computed
for a whole batch at once (:func:`simdb.core.sketch.chars.grouped_sketches`) next to the batched
fingerprints.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from simdb.core.fingerprint import VERIFIED_OPTIONS, Fingerprinter
from simdb.core.fingerprint import long_texts as _long
from simdb.core.fingerprint.batch import CHUNK_TOKENS, fingerprints_of_ids
from simdb.core.fingerprint.bitsum import count_majority, weighted_count_majority
from simdb.core.fingerprint.hashing import ascii_table, ascii_words, lookup
from simdb.core.sketch import (
    SCHEME,
    SCHEME_V3,
    Verifier,
    shingle_combine,
    shingle_finish,
    shingle_values,
    token_hashes,
    tokens,
)
from simdb.core.sketch.chars import BlockHook, bottom_k_groups, grouped_sketches, text_sketch
from simdb.core.sketch.compare import SketchRows
from simdb.errors import InvalidArgumentError

__all__ = ["candidate_fingerprinter", "fingerprint_and_sketch", "fingerprints_and_sketches", "sketch_of_values", "sketch_text", "sketch_texts"]

#: texts with more tokens than this get their sketch alone (bounds the batch's arrays)
BATCH_MAX_TOKENS = 4096

#: tokens per block of batched sketches (:func:`_blocked_sketches`: cache-sized temporaries)
SKETCH_BLOCK_TOKENS = 65_536

_ASCII_WORD = re.compile(r"[a-z0-9]+").findall  # \w+ of lower-cased ASCII without "_"


_ISSUE8 = Fingerprinter(stopwords=False, weighting="tf")  # candidate of the first verified collections
_VERIFIED = Fingerprinter(**VERIFIED_OPTIONS)


def candidate_fingerprinter() -> Fingerprinter:
    """The Fingerprinter of new verified collections: ``Fingerprinter.preset("verified")``
    (the sketch's token stream, stopwords at 2/3 weight; why: :data:`simdb.core.fingerprint.VERIFIED_OPTIONS`)."""
    return _VERIFIED


@lru_cache(maxsize=8)
def _sharing(fingerprinter: Fingerprinter) -> str | None:
    """How this Fingerprinter's words relate to the sketch's tokens: "all" (the same tokens,
    the verified candidate), "ascii" (the same on ASCII text without "_": the first verified candidate,
    ``\\w+`` words at weight one), None (nothing shared)."""
    if fingerprinter == _VERIFIED:
        return "all"
    if fingerprinter == _ISSUE8:
        return "ascii"
    return None


def sketch_of_values(values: np.ndarray, size: int) -> np.ndarray:
    """The ``size`` smallest distinct values (int32, ascending) of a text's shingle values."""
    values = np.sort(values)
    if len(values) > 1:
        keep = np.empty(len(values), dtype=bool)
        keep[0] = True
        np.not_equal(values[1:], values[:-1], out=keep[1:])
        values = values[keep]
    return values[:size]


def sketch_text(sketch: np.ndarray | list[int] | None) -> str | None:
    """A sketch as PostgreSQL's int4[] text (``{v1,v2,...}``); None for no sketch."""
    if sketch is None or len(sketch) == 0:
        return None
    values = sketch.tolist() if isinstance(sketch, np.ndarray) else sketch
    return "{" + ",".join(map(str, values)) + "}"


def _shared(text: str, fingerprinter: Fingerprinter, verifier: Verifier) -> tuple[int | None, np.ndarray] | None:
    """(fingerprint, the xxh64 of the sketch's tokens) when the fingerprint reads the same tokens
    as the sketch (one tokenization and hashing for both); None when they must be computed apart."""
    if verifier.scheme != SCHEME_V3 or len(text) > _long.SEGMENT_CHARS:
        return None
    how = _sharing(fingerprinter)
    if how == "all":
        toks = tokens(text)
        cache, ids = lookup(0, False, toks)  # before reading cache.hashes (see lookup)
        if not len(ids):
            return None, ids.astype(np.uint64)
        sw = fingerprinter.stopword_weights
        assert sw is not None
        hashes = cache.hashes[ids]
        return weighted_count_majority(hashes, np.where(cache.is_stop[ids], sw[0], sw[1])), hashes
    if how == "ascii" and text.isascii() and "_" not in text:
        words = _ASCII_WORD(text.lower())
        cache, ids = lookup(0, False, words)
        hashes = cache.hashes[ids]
        return (count_majority(hashes) if len(hashes) else None), hashes
    return None


def fingerprint_and_sketch(
    text: str, fingerprinter: Fingerprinter, verifier: Verifier, each_block: BlockHook | None = None
) -> tuple[int | None, np.ndarray | list[int] | None]:
    """(unsigned fingerprint or None for no features, sketch or None for no tokens) of ``text``:
    ``fingerprinter.fingerprint(text, empty=None)`` and ``verifier.sketch(text)``, sharing the
    tokenization when both read the same words (see the module docstring)."""
    if verifier.scheme == SCHEME:  # each_block: as fingerprints_and_sketches's
        sk = text_sketch(text, verifier.size, each_block)
        return fingerprinter.fingerprint(text, empty=None), (sk if len(sk) else None)
    shared = _shared(text, fingerprinter, verifier)
    if shared is None:
        return fingerprinter.fingerprint(text, empty=None), verifier.sketch(text)
    fp, hashes = shared
    if not len(hashes):
        return fp, None
    return fp, sketch_of_values(shingle_values(hashes), verifier.size)




def fingerprints_and_sketches(
    texts: list[str], fingerprinter: Fingerprinter, verifier: Verifier, each_block: BlockHook | None = None
) -> tuple[list[int | None], SketchRows]:
    """:func:`fingerprint_and_sketch` of many texts: the fingerprints, and the sketches as one
    :class:`simdb.core.sketch.compare.SketchRows` (row ``i`` is text ``i``'s sketch; empty: no tokens).

    Why batched: a text's sketch is a handful of vector operations on ~50-250 values, where
    numpy's per-call overhead would dominate; here the shingle values of all ``tok3-xxh64-v3``
    texts are computed, sorted and cut at the sketch size in one set of array operations
    (keys = text number << 32 | value), so a sketch costs about its own size in work. Why CSR
    and not a list of lists: the loader writes the values straight into COPY's binary format
    (:mod:`simdb.store.encode`) without a Python int per value."""
    if verifier.scheme == SCHEME or each_block is not None:
        return _char_features(texts, fingerprinter, verifier, each_block)
    fps: list[int | None] = [None] * len(texts)
    parts: list[np.ndarray | None] = [None] * len(texts)
    if verifier.scheme != SCHEME_V3:
        for i, t in enumerate(texts):
            fps[i], sk = fingerprinter.fingerprint(t, empty=None), verifier.sketch(t)
            parts[i] = None if sk is None else np.asarray(sk, dtype=np.int32)
        return fps, SketchRows.from_arrays(parts)
    batch_ids: list[int] = []
    batch_hashes: list[np.ndarray] = []
    together = _tokens_together(texts, fingerprinter) if _sharing(fingerprinter) == "all" else {}
    for i, t in enumerate(texts):
        shared = together[i] if i in together else _shared(t, fingerprinter, verifier)
        if shared is None:
            fps[i] = fingerprinter.fingerprint(t, empty=None)
            toks = tokens(t)
            if not toks:
                continue
            hashes = token_hashes(toks)
        else:
            fps[i], hashes = shared
            if not len(hashes):
                continue
        if len(hashes) > BATCH_MAX_TOKENS:
            parts[i] = sketch_of_values(shingle_values(hashes), verifier.size)
            continue
        batch_ids.append(i)
        batch_hashes.append(hashes)
    if not batch_ids:
        return fps, SketchRows.from_arrays(parts)
    values, offsets = _blocked_sketches(batch_hashes, verifier.size)
    if len(batch_ids) == len(texts):  # the common case: the batch is the answer
        return fps, SketchRows.from_csr(values, offsets)
    for j, i in enumerate(batch_ids):
        parts[i] = values[offsets[j] : offsets[j + 1]]
    return fps, SketchRows.from_arrays(parts)


def _char_features(
    texts: list[str], fingerprinter: Fingerprinter, verifier: Verifier, each_block: BlockHook | None
) -> tuple[list[int | None], SketchRows]:
    """:func:`fingerprints_and_sketches` under the character-gram scheme; ``each_block`` (band keys
    of the same pass, :class:`simdb.core.sketch.bands.BlockBandKeys`) sees the grams hashed."""
    if verifier.scheme != SCHEME:
        raise InvalidArgumentError(f"each_block needs the character-gram scheme {SCHEME!r}, not {verifier.scheme!r}")
    sketches = SketchRows.from_csr(*grouped_sketches(texts, verifier.size, each_block))
    return _fingerprints_of(texts, fingerprinter), sketches


def _fingerprints_of(texts: list[str], fingerprinter: Fingerprinter) -> list[int | None]:
    """``fingerprinter.fingerprint(t, empty=None)`` of each text, batched: the candidate
    Fingerprinter's through :func:`_tokens_together` (texts up to ``SEGMENT_CHARS``), any other's
    through ``Fingerprinter.many``."""
    if _sharing(fingerprinter) != "all":
        return fingerprinter.many(texts, empty=None)
    together = _tokens_together(texts, fingerprinter)
    return [together[i][0] if i in together else fingerprinter.fingerprint(t, empty=None) for i, t in enumerate(texts)]


def _blocked_sketches(hash_arrays: list[np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_batch_sketches` over blocks of about :data:`SKETCH_BLOCK_TOKENS` tokens, joined
    into one CSR.

    Why blocks: the batch's temporaries are a few arrays of 8 bytes per token; for a whole
    20,000-text chunk (~3M tokens) each is ~25 MB, which the allocator maps fresh and the
    kernel faults in page by page, and two worker processes then share the memory bus. In
    blocks of ~64k tokens (~0.5 MB arrays, kept in cache) the sketches cost half as much
    (measured: 4.5 -> 2.3 us a 136-token text, one process)."""
    if sum(map(len, hash_arrays)) <= SKETCH_BLOCK_TOKENS:
        return _batch_sketches(hash_arrays, size)
    values: list[np.ndarray] = []
    offsets: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
    done = 0
    start = tokens_in_block = 0
    for j, h in enumerate(hash_arrays):
        tokens_in_block += len(h)
        if tokens_in_block >= SKETCH_BLOCK_TOKENS or j == len(hash_arrays) - 1:
            v, o = _batch_sketches(hash_arrays[start : j + 1], size)
            values.append(v)
            offsets.append(o[1:] + done)
            done += len(v)
            start, tokens_in_block = j + 1, 0
    return np.concatenate(values), np.concatenate(offsets)


_TOKENS_ASCII = ascii_table("tokens", True)


def _tokens_together(texts: list[str], fingerprinter: Fingerprinter) -> dict[int, tuple[int | None, np.ndarray]]:
    """(fingerprint, token hashes) of the texts (up to ``long_texts.SEGMENT_CHARS`` characters)
    whose Fingerprinter reads the sketch's own tokens: :func:`_shared` for many texts at once.

    Why: per text, looking the tokens up and summing their bits are a few small numpy calls
    whose fixed cost matched the work; here a batch of ~16k tokens is looked up in one call
    and bit-counted in one set of calls (:func:`simdb.core.fingerprint.batch.fingerprints_of_ids`,
    the batched ``Fingerprinter.many``), and ASCII texts are split by ``bytes.translate``
    (:func:`simdb.core.fingerprint.hashing.ascii_words`: the same tokens as the regular expression)."""
    out: dict[int, tuple[int | None, np.ndarray]] = {}
    weights = fingerprinter.stopword_weights
    pending: list[int] = []
    words: list[str | bytes] = []
    lengths: list[int] = []

    def flush() -> None:
        cache, ids = lookup(0, False, words)  # before reading cache.hashes (see lookup)
        lens = np.array(lengths, dtype=np.int64)
        fps = fingerprints_of_ids(cache, ids, lens, False, weights)
        hashes = cache.hashes[ids]
        ends = np.cumsum(lens).tolist()
        for j, i in enumerate(pending):
            out[i] = (fps[j], hashes[ends[j] - lengths[j] : ends[j]])
        pending.clear()
        words.clear()
        lengths.clear()

    for i, t in enumerate(texts):
        if len(t) > _long.SEGMENT_CHARS:
            continue  # its own bounded-memory path (_shared declines it)
        ascii_toks = ascii_words(t, _TOKENS_ASCII) if _TOKENS_ASCII is not None and t.isascii() else None
        toks: list[str] | list[bytes] = tokens(t) if ascii_toks is None else ascii_toks
        if words and len(words) + len(toks) > CHUNK_TOKENS:
            flush()
        pending.append(i)
        words.extend(toks)
        lengths.append(len(toks))
    if pending:
        flush()
    return out


def sketch_texts(rows: SketchRows) -> list[str | None]:
    """Each row of ``rows`` as int4[] text (:func:`sketch_text`), for a statement's text parameter."""
    bounds = rows.offsets.tolist()
    strs = list(map(str, rows.values.tolist()))
    return ["{" + ",".join(strs[a:b]) + "}" if b > a else None for a, b in zip(bounds, bounds[1:])]


def _batch_sketches(hash_arrays: list[np.ndarray], size: int) -> tuple[np.ndarray, np.ndarray]:
    """The sketches of texts given their tokens' hashes (each non-empty), as CSR
    (int32 values, int64 offsets: text ``j`` is ``values[offsets[j]:offsets[j + 1]]``)."""
    lens = np.fromiter(map(len, hash_arrays), dtype=np.int64, count=len(hash_arrays))
    allh = np.concatenate(hash_arrays)
    tid = np.repeat(np.arange(len(lens), dtype=np.uint64), lens)
    starts = np.zeros(len(lens), dtype=np.int64)
    np.cumsum(lens[:-1], out=starts[1:])
    pos = np.arange(len(allh), dtype=np.int64) - np.repeat(starts, lens)
    # every window of 3 tokens inside one text (a text of 1-2 tokens: its one shingle, below)
    padded = np.concatenate([allh, np.zeros(2, dtype=np.uint64)])
    valid = pos <= np.repeat(lens, lens) - 3
    values = [shingle_finish(shingle_combine(padded[:-2], padded[1:-1], padded[2:])[valid])]
    keys = [tid[valid]]
    for j in np.flatnonzero(lens < 3):
        values.append(shingle_values(hash_arrays[j]))
        keys.append(np.array([j], dtype=np.uint64))
    return bottom_k_groups(np.concatenate(values), np.concatenate(keys), len(lens), size)
