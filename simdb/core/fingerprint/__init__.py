"""Features -> 64-bit SimHash (the pinned core) and the ``Fingerprinter`` configuration.

The pinned core, for features ``f`` with weights ``w``:

    h = xxh64(f.encode("utf-8"), seed)            # unsigned 64-bit
    v[i] += w  if bit i of h is 1  else  v[i] -= w   (bit 0 = least significant)
    fingerprint bit i = 1  iff  v[i] > 0

``v[i]`` is the *exact* sum: integer weights are summed as integers, and when
any weight is not an integer every weight is taken as an IEEE double and the
sign of the exact real sum of those doubles decides the bit (so the result does
not depend on summation order). No features -> 0, or the ``empty`` value the
caller passes (a store passes ``None`` so featureless texts never match).

Speed: tokens are hashed once per process through a bounded cache (word
frequencies are Zipfian), and the bit sums are a BLAS matrix-vector product
over the unpacked hash bits, exact because integer weights stay below 2^24
(float32) or 2^53 (float64); float weights are checked against a rounding
error bound and the few doubtful bits are recomputed exactly. Single words with tf / binary
weights are counted in byte lanes instead, a batch of texts at a time in ``many()``
(simdb.core.fingerprint.bitsum), and ASCII text is cut by
simdb.core.fingerprint.hashing.

Also here, the one-call front doors: ``simhash(text_or_features, **options)`` (``simdb.simhash``)
and ``query_fingerprint`` (how the SQLAlchemy and Django integrations read a query).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, cast

import numpy as np

from simdb.core import tokenize as _tok
from simdb.core.bits import MASK64
from simdb.core.fingerprint import long_texts as _long
from simdb.core.fingerprint.bitsum import (
    LANE_MAX,
    SHORT_WEIGHTED_MAX,
    count_majority,
    majority,
    short_majority,
    short_weighted_majority,
    unigram_many,
    weighted_count_majority,
    xxh64_windows,
)
from simdb.core.fingerprint.checks import (
    ALGORITHMS,
    FINGERPRINT_VERSION,
    TOKENIZERS,
    check_seed,
    parse_features,
    stopword_fraction,
    validate_options,
)
from simdb.core.fingerprint.hashing import (
    ascii_table,
    ascii_words,
    distinct_ids,
    hash_keys,
    lookup,
    stopword_set,
)
from simdb.core.fingerprint.pypi_values import pypi_simhash, pypi_tokenize
from simdb.core.fingerprint.weighting import IdfTable, apply_weighting
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.util import parallel as _parallel

__all__ = [
    "ALGORITHMS",
    "VERIFIED_OPTIONS",
    "FINGERPRINT_VERSION",
    "TOKENIZERS",
    "Fingerprinter",
    "query_fingerprint",
    "shutdown_pools",
    "simhash",
    "simhash_features",
]


def simhash_features(features: Any, *, seed: int = 0, empty: Any = 0) -> Any:
    """SimHash of caller-supplied features by the pinned core.

    ``features``: a ``Mapping[str, number]``, or an iterable of ``str`` (weight 1)
    and/or ``(str, weight)`` pairs; repeated features add up. No features ->
    ``empty`` (default 0).
    """
    seed = check_seed(seed)
    keys, weights, all_int = parse_features(features)
    if not keys:
        return empty
    if not all_int:
        weights = [float(w) for w in weights]
    return majority(hash_keys(keys, seed), weights, all_int)


# =========================================================================== Fingerprinter


#: the candidate Fingerprinter of new verified collections (``Fingerprinter.preset("verified")``).
#: Measured (docs/near-duplicates.md): on real paragraphs with edited copies, pairs at Jaccard
#: >= 0.8 within 11 bits: English 0.991, Chinese 0.992 (the issue-8 candidate, jieba words and
#: stopwords at full weight: 0.995 / 0.955), and unrelated rows within 11 bits in a collection of
#: 1M texts: English ~15, Chinese ~40 per text (issue 8's: ~340 / ~54).
VERIFIED_OPTIONS: dict[str, Any] = {"tokenizer": "tokens", "stopwords": 2 / 3}


@dataclasses.dataclass(frozen=True)
class Fingerprinter:
    """An immutable, JSON-serialisable text -> SimHash configuration.

    Options (``None`` picks the per-tokenizer default, so equal pipelines compare equal):

    - ``tokenizer``: ``"default"`` (``\\w+`` words, Han runs segmented by jieba),
      ``"words"`` (``\\w+`` only, no jieba), ``"chars"`` (character n-grams of the
      ``\\w`` characters), ``"keywords"`` (jieba TF-IDF keywords with their weights;
      measured worst for near-duplicates).
    - ``ngram``: word shingle size (default 1) or character n-gram size for
      ``"chars"`` (default 4).
    - ``stopwords``: drop the shipped English/Chinese stopwords (default True for
      word tokenizers; not applicable to ``"chars"``); ``False`` keeps them; a number
      p/q in (0, 1) (q <= 16, e.g. ``2/3``) keeps them at that weight against other
      words (single words, ``weighting="tf"``): frequent words still count, but no longer
      pull every text's fingerprint toward the same bits.
    - ``weighting``: ``"tf"`` (default), ``"binary"``, ``"logtf"``, ``"tfidf"`` (needs ``idf``).
    - ``idf``: an ``IdfTable`` (see ``fit_idf``).
    - ``top_k``: number of keywords in ``"keywords"`` mode (default 20).
    - ``normalize``: NFKC + casefold first (default True).
    - ``seed``: xxh64 seed, 0 <= seed < 2^64 (default 0).
    - ``algorithm``: ``"simdb"`` (the pinned xxh64 core) or ``"simhash-pypi"``
      (reproduces PyPI ``simhash`` 2.x exactly; takes no other options).
    - ``version``: the fingerprint definition version (only 1 exists).
    """

    tokenizer: str = "default"
    ngram: int | None = None
    stopwords: bool | float | None = None
    weighting: str | None = None
    idf: IdfTable | None = None
    top_k: int | None = None
    normalize: bool = True
    seed: int = 0
    algorithm: str = "simdb"
    version: int = FINGERPRINT_VERSION

    # ------------------------------------------------------------------ validation
    def __post_init__(self):
        """Check the options and fill in the per-tokenizer defaults (:mod:`simdb.core.fingerprint.checks`)."""
        validate_options(self, lambda k, v: object.__setattr__(self, k, v))

    # ------------------------------------------------------------------ presets / construction
    @classmethod
    def preset(cls, name: str) -> Fingerprinter:
        """Named configurations: ``"default"``, ``"simhash-pypi"`` (PyPI simhash 2.x compatible),
        ``"shingles"`` (word 3-gram shingles), ``"chars"`` (4-character shingles), ``"verified"``
        (the candidate fingerprint of new verified collections: ``tokens``, stopwords at 2/3)."""
        if not isinstance(name, str):
            raise InvalidTypeError(f"name must be str, got {type(name).__name__}")
        presets = {
            "default": {},
            "simhash-pypi": {"algorithm": "simhash-pypi"},
            "shingles": {"ngram": 3},
            "chars": {"tokenizer": "chars"},
            "verified": dict(VERIFIED_OPTIONS),
        }
        if name not in presets:
            raise InvalidArgumentError(f"name must be one of {sorted(presets)}, got {name!r}")
        return cls(**cast(dict[str, Any], presets[name]))

    def replace(self, **changes) -> Fingerprinter:
        return dataclasses.replace(self, **changes)

    def fit_idf(self, texts: Iterable[str], *, min_df: int = 1) -> Fingerprinter:
        """This configuration with ``weighting='tfidf'`` and an ``IdfTable`` fitted on ``texts``."""
        table = IdfTable.fit(texts, self.replace(weighting="tf", idf=None) if self.idf else self, min_df=min_df)
        return dataclasses.replace(self, weighting="tfidf", idf=table)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["idf"] = self.idf.to_dict() if self.idf is not None else None
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Fingerprinter:
        if not isinstance(data, Mapping):
            raise InvalidTypeError(f"data must be a mapping, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in names]
        if unknown:
            raise InvalidArgumentError(f"unknown Fingerprinter option(s): {', '.join(map(str, unknown))}")
        kwargs = dict(data)
        if isinstance(kwargs.get("idf"), Mapping):
            kwargs["idf"] = IdfTable.from_dict(kwargs["idf"])
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Fingerprinter:
        if not isinstance(text, (str, bytes, bytearray)):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        data = json.loads(text)
        return cls.from_dict(data)

    # ------------------------------------------------------------------ features
    def counts(self, text: str) -> dict[str, int]:
        """Features of ``text`` with their counts (before weighting)."""
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        tok = self.tokenizer
        if self.algorithm == "simhash-pypi":
            return Counter(pypi_tokenize(text))
        if tok == "default" or tok == "words" or tok == "tokens":
            tokens = self._tokens(_tok.normalize(text) if self.normalize else text)
            stop = stopword_set() if self.stopwords is True else None
            if self.ngram == 1:
                c = Counter(tokens)
                if stop is not None:
                    for s in stop.intersection(c):
                        del c[s]
                return c
            if stop is not None:
                tokens = [t for t in tokens if t not in stop]
            return Counter(_tok.word_ngrams(tokens, self._n))
        if tok == "chars":
            return Counter(_tok.char_ngrams(text, self._n, normalize_text=self.normalize))
        # keywords
        return dict.fromkeys((w for w, _ in self._keywords(text)), 1)

    def _tokens(self, text: str) -> list[str]:
        """The word tokens of (normalised) ``text`` by this configuration's tokenizer."""
        if self.tokenizer == "tokens":
            return _tok.mixed_tokens(text)
        return _tok.split(text, segment_cjk=self.tokenizer == "default")

    @functools.cached_property
    def _ascii_table(self) -> bytes | None:
        """The translate table that cuts this configuration's words out of ASCII text (None: none does)."""
        return ascii_table(self.tokenizer, self.normalize)

    def _words(self, text: str, t: str | None = None) -> list[str] | list[bytes]:
        """Word tokens of raw ``text`` (``t``: it normalised); bytes when all are ASCII (simdb.core.fingerprint.hashing)."""
        table = self._ascii_table
        if table is not None and text.isascii():
            return cast(list[bytes], ascii_words(text, table))  # ASCII text: never None
        t = (_tok.normalize(text) if self.normalize else text) if t is None else t
        words = None if table is None else ascii_words(t, table)
        return self._tokens(t) if words is None else words

    @functools.cached_property  # read once per text; the fraction check costs ~1 us
    def stopword_weights(self) -> tuple[int, int] | None:
        """(weight of a stopword occurrence, weight of any other word) when ``stopwords`` is a
        number (a fraction p/q: (p, q)); None when stopwords are dropped or kept at weight 1."""
        if isinstance(self.stopwords, bool):
            return None
        return stopword_fraction(self.stopwords)

    def _keywords(self, text: str) -> list[tuple[str, float]]:
        return _tok.jieba_keywords(text, cast(int, self.top_k), stopwords_=bool(self.stopwords), normalize_text=self.normalize)

    def features(self, text: str) -> dict[str, int | float]:
        """The weighted features of ``text`` this configuration hashes."""
        if self.tokenizer == "keywords" and self.algorithm == "simdb":
            if not isinstance(text, str):
                raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
            return dict(self._keywords(text))
        weighted = dict(apply_weighting(self.counts(text), cast(str, self.weighting), self.idf))
        sw = self.stopword_weights
        if sw is not None:  # integers: p per stopword occurrence, q per other word (exact sums)
            stop = stopword_set()
            weighted = {w: c * (sw[0] if w in stop else sw[1]) for w, c in weighted.items()}
        return weighted

    @property
    def _n(self) -> int:
        """``ngram`` as validated (``__post_init__`` fills the default in: never None after it)."""
        return cast(int, self.ngram)

    @property
    def int_weights(self) -> bool:
        """True when weights are integers (tf, binary): bit sums are then exact integers."""
        return self.weighting in ("tf", "binary")

    # ------------------------------------------------------------------ fingerprints
    def fingerprint(self, text: str, empty: Any = 0) -> Any:
        """The 64-bit SimHash of ``text`` (an int in [0, 2^64)); ``empty`` when it has no features."""
        if self.algorithm == "simhash-pypi":
            if not isinstance(text, str):
                raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
            return pypi_simhash(text)
        if self._fast:
            return self._fingerprint_tokens(text, empty)
        feats = self.features(text)
        if not feats:
            return empty
        keys = list(feats)
        weights = list(feats.values())
        return majority(hash_keys(keys, self.seed, self.ngram == 1 or self.tokenizer == "chars"),
                         weights, self.int_weights)

    @property
    def _fast(self) -> bool:
        return self.algorithm == "simdb" and self.weighting in ("tf", "binary") and self.tokenizer != "keywords"

    def _fingerprint_tokens(self, text: str, empty: Any) -> Any:
        """tf / binary weights: sum the hash bits once per feature occurrence.

        Summing +-1 per occurrence equals summing +-tf per distinct feature, so no
        counting is needed; with single-word features, stopwords map to id 0 in the
        token cache and are dropped by one array comparison.
        """
        if not isinstance(text, str):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        binary = self.weighting == "binary"
        if self.tokenizer == "chars":
            n = self._n
            chars = _tok.char_stream(text, normalize_text=self.normalize)
            if not binary and len(chars) > n and n < 32 and chars.isascii():
                hashes = xxh64_windows(chars.encode("ascii"), n, self.seed)
            else:
                feats = [chars] if 0 < len(chars) <= n else [chars[i : i + n] for i in range(len(chars) - n + 1)]
                cache, ids = lookup(self.seed, False, feats)
                hashes = cache.hashes[distinct_ids(cache, ids) if binary else ids]
        elif self.ngram == 1:
            return self._fingerprint_words(text, binary, empty)
        else:
            tokens = self._tokens(_tok.normalize(text) if self.normalize else text)
            if self.stopwords:
                stop = stopword_set()
                tokens = [w for w in tokens if w not in stop]
            feats = _tok.word_ngrams(tokens, self._n)
            if binary:
                feats = list(set(feats))
            hashes = hash_keys(feats, self.seed, use_cache=False)
        return count_majority(hashes) if len(hashes) else empty

    def _fingerprint_words(self, text: str, binary: bool, empty: Any) -> Any:
        """Single words: ids from the token cache (stopwords: id 0), bits counted in byte lanes
        when the text is short (simdb.core.fingerprint.bitsum's byte lanes: a few numpy calls), else by a float32 product."""
        tokens: list[str] | list[bytes]
        if text.isascii() and len(text) <= _long.SEGMENT_CHARS:
            tokens = self._words(text)  # as bytes (simdb.core.fingerprint.hashing.ascii_words)
        else:
            t = _tok.normalize(text) if self.normalize else text
            if len(t) > _long.SEGMENT_CHARS:  # memory ~ distinct words (simdb.core.fingerprint.long_texts)
                return _long.unigram_fingerprint(t, self._unigram_hashes, binary, empty)
            tokens = self._words(text, t)
        sw = self.stopword_weights
        if sw is not None:  # stopwords kept, weighted p : q against other words
            cache, ids = lookup(self.seed, False, tokens)  # before reading cache.hashes (see lookup)
            if not len(ids):
                return empty
            if len(ids) <= SHORT_WEIGHTED_MAX:
                return short_weighted_majority(cache.hashes, ids, cache.is_stop, *sw)
            return weighted_count_majority(cache.hashes[ids], np.where(cache.is_stop[ids], sw[0], sw[1]))
        cache, ids = lookup(self.seed, self.stopwords is True, tokens)
        if binary:
            ids = distinct_ids(cache, ids)
        if len(ids) <= LANE_MAX:  # id 0, a dropped stopword, has hash 0 and is not counted
            return short_majority(cache.hashes, ids, empty)
        hashes = cache.hashes[ids[ids != 0] if self.stopwords else ids]
        return count_majority(hashes) if len(hashes) else empty

    def _unigram_hashes(self, piece: str) -> np.ndarray:
        """The hash of each kept word of a piece of normalised text (for simdb.core.fingerprint.long_texts)."""
        tokens = self._tokens(piece)
        sw = self.stopword_weights
        cache, ids = lookup(self.seed, self.stopwords is True, tokens)
        if sw is not None:  # weights by repetition: p copies of a stopword, q of any other word
            return np.repeat(cache.hashes[ids], np.where(cache.is_stop[ids], sw[0], sw[1]))
        if self.stopwords:
            ids = ids[ids != 0]
        return cache.hashes[ids]

    def fingerprint_features(self, features: Any, empty: Any = 0) -> Any:
        """SimHash of caller-supplied features with this configuration's hash (seed / algorithm)."""
        if self.algorithm == "simhash-pypi":
            if isinstance(features, (str, bytes, bytearray)):
                raise InvalidTypeError("features must be a mapping or an iterable, not str/bytes")
            return pypi_simhash(features)
        return simhash_features(features, seed=self.seed, empty=empty)

    def many(self, texts: Iterable[str], workers: int | None = None, empty: Any = 0) -> list:
        """Fingerprints of ``texts`` in order; ``workers >= 2`` uses a process pool.

        The pool (:mod:`simdb.util.parallel`: one per worker count, started once, reused
        by later calls and shut down at exit) uses the ``forkserver`` start method
        where available, else ``spawn``, so call it from code guarded by
        ``if __name__ == "__main__":`` in scripts. Texts travel in chunks of at
        least 64k characters and fingerprints come back as arrays; the values are
        those of one process.
        """
        texts = _text_list(texts)
        workers = _parallel.check_workers(workers)
        if workers is None or workers == 1 or len(texts) < 2:
            return self._many_local(texts, empty)
        return _many_pool(self, texts, workers, empty)

    def _many_local(self, texts: list[str], empty: Any) -> list:
        if self._fast and self.ngram == 1 and self.tokenizer != "chars":  # words, tf / binary: in batches
            return unigram_many(texts, self._words, lambda t: self.fingerprint(t, empty), seed=self.seed,
                                drop_stopwords=self.stopwords is True, stop_weights=self.stopword_weights,
                                binary=self.weighting == "binary", empty=empty)
        f = self.fingerprint
        return [f(t, empty) for t in texts]


def _text_list(texts: Iterable[str]) -> list[str]:
    """``texts`` as a list, each a str (``many``'s argument)."""
    if isinstance(texts, (str, bytes)):
        raise InvalidTypeError("texts must be an iterable of str, not a single str/bytes")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise InvalidTypeError(f"texts[{i}] must be str, got {type(t).__name__}")
    return out


# =========================================================================== process pool

#: shut down the worker pools ``Fingerprinter.many(workers=N)`` started (simdb.util.parallel)
shutdown_pools = _parallel.shutdown


# Fingerprinter.many(workers=N): how texts travel to the pool (simdb.util.parallel: one per worker count,
# started once, reused, shut down at exit) and back: in chunks of at least 64k characters (transfer and
# task overhead stay small), at least 4 per worker (load balance), at most 4M characters (memory), with
# fingerprints coming back as arrays (cheap to send).

def _many_chunk(fp: Fingerprinter, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """In a worker: (uint64 fingerprints, bool "no features") of a chunk, as arrays (cheap to send)."""
    out = np.zeros(len(texts), dtype=np.uint64)
    none = np.zeros(len(texts), dtype=bool)
    for i, v in enumerate(fp.many(texts, None, None)):
        if v is None:
            none[i] = True
        else:
            out[i] = v
    return out, none


def _text_chunks(texts: list[str], target: int) -> Iterable[list[str]]:
    cur: list[str] = []
    size = 0
    for t in texts:
        cur.append(t)
        size += len(t)
        if size >= target:
            yield cur
            cur, size = [], 0
    if cur:
        yield cur


def _many_pool(fp: Fingerprinter, texts: list[str], workers: int, empty: Any) -> list:
    """``fp``'s fingerprints of ``texts`` in order, computed by ``workers`` processes."""
    total = sum(map(len, texts))
    target = max(1 << 16, min(1 << 22, total // (workers * 4) + 1))
    out: list = []
    for fps, none in _parallel.imap(functools.partial(_many_chunk, fp), _text_chunks(texts, target), workers):
        vals = fps.tolist()
        if none.any():
            for i in np.flatnonzero(none).tolist():
                vals[i] = empty
        out.extend(vals)
    return out


# The one-call front doors: simdb.simhash() and the integrations' reading of a query

@functools.lru_cache(maxsize=64)
def _fingerprinter_for(items: tuple) -> Fingerprinter:
    return Fingerprinter(**dict(items))


_TEXT_ONLY = ("tokenizer", "ngram", "stopwords", "weighting", "idf", "top_k", "normalize")


def simhash(text_or_features: Any, *, empty: Any = 0, **options: Any) -> Any:
    """64-bit SimHash (int in [0, 2^64)) of a text or of weighted features.

    A ``str`` goes through ``Fingerprinter(**options)`` (the default pipeline
    when no options are given). A ``Mapping[str, number]`` or an iterable of
    ``str`` / ``(str, weight)`` pairs is hashed directly (options: ``seed``,
    ``algorithm``). No features -> ``empty`` (default 0).
    """
    try:
        fp = _fingerprinter_for(tuple(sorted(options.items())))
    except TypeError as exc:
        if "unhashable" not in str(exc):
            raise
        fp = Fingerprinter(**options)
    if isinstance(text_or_features, str):
        return fp.fingerprint(text_or_features, empty=empty)
    if isinstance(text_or_features, (bytes, bytearray)) or not isinstance(text_or_features, (Mapping, Iterable)):
        raise InvalidTypeError(
            "text_or_features must be a str, a Mapping[str, number] or an iterable of str / (str, weight), "
            f"got {type(text_or_features).__name__}"
        )
    bad = [k for k in options if k in _TEXT_ONLY]
    if bad:
        raise InvalidArgumentError(f"option {bad[0]!r} applies to text input only, not to features")
    return fp.fingerprint_features(text_or_features, empty=empty)


def query_fingerprint(query: Any, fingerprinter: Fingerprinter | None = None) -> int | None:
    """A search's query as an unsigned fingerprint: an int is taken as is, a str is fingerprinted.

    Returns None for a text with no features (it matches nothing). Shared by the
    SQLAlchemy and Django integrations, so both read a query the same way.
    """
    if isinstance(query, bool):
        raise InvalidTypeError("query must be a text or an int fingerprint, got bool")
    if isinstance(query, int):
        if not 0 <= query <= MASK64:
            raise InvalidArgumentError(f"fingerprint must be in [0, 2**64), got {query}")
        return query
    if isinstance(query, str):
        return (fingerprinter or Fingerprinter()).fingerprint(query, empty=None)
    raise InvalidTypeError(f"query must be a text or an int fingerprint, got {type(query).__name__}")
