"""Features -> 64-bit SimHash (the pinned core) and the ``Fingerprinter`` configuration.

The pinned core, for features ``f`` with weights ``w``::

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
over the unpacked hash bits, exact because integer weights stay below 2**24
(float32) or 2**53 (float64); float weights are checked against a rounding
error bound and the few doubtful bits are recomputed exactly.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache, partial
from typing import Any

import numpy as np
import xxhash

from simdb import parallel as _parallel
from simdb import tokenize as _tok
from simdb.bits import MASK64
from simdb.weighting import WEIGHTINGS, IdfTable, apply_weighting

__all__ = [
    "ALGORITHMS",
    "query_fingerprint",
    "FINGERPRINT_VERSION",
    "TOKENIZERS",
    "Fingerprinter",
    "shutdown_pools",
    "simhash",
    "simhash_features",
]

FINGERPRINT_VERSION = 1
TOKENIZERS = ("default", "words", "chars", "keywords")
ALGORITHMS = ("simdb", "simhash-pypi")
_MAX_SEED = (1 << 64) - 1
_HASH_CACHE_MAX = 1 << 18  # tokens per (seed, stopwords) cache; replaced when full
_F32_EXACT = 1 << 24
_F64_EXACT = 1 << 53
_U = 2.0**-53
_ONES32 = np.ones(1 << 14, dtype=np.float32)
_ONES32.flags.writeable = False


# =========================================================================== core


_xxh = xxhash.xxh64_intdigest


class _TokenCache(dict):
    """token -> id, with ``hashes[id] = xxh64(token, seed)``; id 0 marks a stopword.

    Lookups are C-speed ``dict`` hits (``map(cache.__getitem__, tokens)``); a miss
    hashes the token under a lock. Ids are never reused within one cache, and a
    full cache is replaced by a fresh one (never cleared in place), so threads
    sharing it always see consistent hashes.
    """

    def __init__(self, seed: int, stop: frozenset[str] | None):
        super().__init__()
        self.seed = seed
        self.next_id = 1
        self.hashes = np.zeros(1024, dtype=np.uint64)
        self.lock = threading.Lock()
        if stop:
            for w in stop:
                dict.__setitem__(self, w, 0)

    def __missing__(self, key: str) -> int:
        h = _xxh(key.encode("utf-8"), self.seed)  # UnicodeEncodeError for lone surrogates
        with self.lock:
            i = dict.get(self, key)
            if i is not None:
                return i
            i = self.next_id
            if i >= len(self.hashes):
                grown = np.zeros(2 * len(self.hashes), dtype=np.uint64)
                grown[: len(self.hashes)] = self.hashes
                self.hashes = grown
            self.hashes[i] = h
            self.next_id = i + 1
            dict.__setitem__(self, key, i)
            return i


_CACHES: dict[tuple[int, bool], _TokenCache] = {}
_CACHES_LOCK = threading.Lock()


def _cache_for(seed: int, stop: bool, room: int = 0) -> _TokenCache:
    """The token cache for (seed, stopwords?), replaced when it would grow past the bound."""
    key = (seed, stop)
    cache = _CACHES.get(key)
    if cache is None or cache.next_id + room > _HASH_CACHE_MAX:
        with _CACHES_LOCK:
            cache = _CACHES.get(key)
            if cache is None or cache.next_id + room > _HASH_CACHE_MAX:
                cache = _TokenCache(seed, _stop() if stop else None)
                _CACHES[key] = cache
    return cache


def _ids(cache: _TokenCache, keys: list[str]) -> np.ndarray:
    try:
        return np.fromiter(map(cache.__getitem__, keys), dtype=np.intp, count=len(keys))
    except UnicodeEncodeError as exc:
        raise ValueError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None


def _hash_keys(keys: list[str], seed: int, use_cache: bool = True) -> np.ndarray:
    """xxh64 of each key's UTF-8 bytes as a uint64 array (through the per-seed cache)."""
    if not use_cache:
        try:
            return np.fromiter((_xxh(k.encode("utf-8"), seed) for k in keys), dtype=np.uint64, count=len(keys))
        except UnicodeEncodeError as exc:
            raise ValueError(f"features must be valid Unicode text (UTF-8 encodable): {exc}") from None
    cache = _cache_for(seed, False, len(keys))
    ids = _ids(cache, keys)
    return cache.hashes[ids]


_P1, _P2, _P3 = np.uint64(0x9E3779B185EBCA87), np.uint64(0xC2B2AE3D27D4EB4F), np.uint64(0x165667B19E3779F9)
_P4, _P5 = np.uint64(0x85EBCA77C2B2AE63), np.uint64(0x27D4EB2F165667C5)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _read_le(b: np.ndarray, starts: np.ndarray, nbytes: int) -> np.ndarray:
    v = np.zeros(len(starts), dtype=np.uint64)
    for j in range(nbytes):
        v |= b[starts + j] << np.uint64(8 * j)
    return v


def _xxh64_windows(data: bytes, width: int, seed: int) -> np.ndarray:
    """XXH64 of every ``width``-byte window of ``data`` (width < 32), vectorised.

    The short-input branch of the xxHash64 specification, on arrays; used for
    ASCII character n-grams, where a window of n characters is n bytes.
    """
    b = np.frombuffer(data, dtype=np.uint8).astype(np.uint64)
    m = len(data) - width + 1
    starts = np.arange(m)
    with np.errstate(over="ignore"):
        h = np.full(m, (seed + 0x27D4EB2F165667C5 + width) & _MAX_SEED, dtype=np.uint64)
        off = 0
        while width - off >= 8:
            k1 = _rotl(_read_le(b, starts + off, 8) * _P2, 31) * _P1
            h ^= k1
            h = _rotl(h, 27) * _P1 + _P4
            off += 8
        if width - off >= 4:
            h ^= _read_le(b, starts + off, 4) * _P1
            h = _rotl(h, 23) * _P2 + _P3
            off += 4
        while off < width:
            h ^= b[starts + off] * _P5
            h = _rotl(h, 11) * _P1
            off += 1
        h ^= h >> np.uint64(33)
        h *= _P2
        h ^= h >> np.uint64(29)
        h *= _P3
        h ^= h >> np.uint64(32)
    return h


def _unpack(hashes: np.ndarray) -> np.ndarray:
    """(n,) uint64 -> (n, 64) uint8 bit matrix, column i = bit i (least significant first)."""
    return np.unpackbits(hashes.astype("<u8", copy=False).view(np.uint8), bitorder="little").reshape(-1, 64)


def _pack(mask: np.ndarray) -> int:
    return int.from_bytes(np.packbits(mask, bitorder="little").tobytes(), "little")


def _exact_scaled(w: float | int) -> int:
    """An int proportional (by 2**1074) to ``w``: exact arithmetic on IEEE doubles."""
    if isinstance(w, int):
        return w << 1074
    num, den = float(w).as_integer_ratio()
    return num * ((1 << 1074) // den)


def _exact_bits(hashes: np.ndarray, weights: list, bits_to_do) -> dict[int, bool]:
    """Decide the given bits exactly in Python (rare: huge ints, near-tie floats)."""
    scaled = [_exact_scaled(w) for w in weights]
    hs = hashes.tolist()
    out = {}
    for i in bits_to_do:
        s = 0
        for h, w in zip(hs, scaled):
            s += w if (h >> i) & 1 else -w
        out[i] = s > 0
    return out


def _majority(hashes: np.ndarray, weights: list, int_weights: bool, abs_total=None) -> int:
    """Fingerprint from hashes and weights by the pinned rule (exact, order independent)."""
    n = len(weights)
    bits = _unpack(hashes)
    if int_weights:
        a = abs_total if abs_total is not None else sum(map(abs, weights))
        if a < _F32_EXACT:
            w = np.fromiter(weights, dtype=np.float32, count=n)
            p = w @ bits.astype(np.float32)
            return _pack(2 * p > float(sum(weights)))
        if a < _F64_EXACT:
            w = np.fromiter(weights, dtype=np.float64, count=n)
            p = w @ bits.astype(np.float64)
            return _pack(2 * p > float(sum(weights)))
        decided = _exact_bits(hashes, weights, range(64))
        return sum(1 << i for i, on in decided.items() if on)
    w = np.fromiter(weights, dtype=np.float64, count=n)
    with np.errstate(over="ignore", invalid="ignore"):
        a = float(np.abs(w).sum())
        p = w @ bits.astype(np.float64)
        v = 2.0 * p - float(w.sum())
        if math.isfinite(a):
            bound = (4 * n + 8) * _U * a + n * 5e-324
            doubtful = np.flatnonzero(~(np.abs(v) > bound) | ~np.isfinite(v))
        else:
            doubtful = np.arange(64)
    mask = v > 0
    if len(doubtful):
        for i, on in _exact_bits(hashes, weights, doubtful.tolist()).items():
            mask[i] = on
    return _pack(mask)


def _check_weight(w: Any, where: str):
    if isinstance(w, bool) or not isinstance(w, numbers.Real):
        raise TypeError(f"{where} must be a real number, got {type(w).__name__}")
    if isinstance(w, numbers.Integral):
        return int(w), True
    w = float(w)
    if not math.isfinite(w):
        raise ValueError(f"{where} must be finite, got {w}")
    return w, False


def _parse_features(features: Any, name: str = "features") -> tuple[list[str], list, bool]:
    """Mapping / iterable of str / iterable of (str, weight) -> (keys, weights, all_int)."""
    if isinstance(features, (str, bytes, bytearray)):
        raise TypeError(
            f"{name} must be a mapping or an iterable of str / (str, weight) pairs, "
            f"not {type(features).__name__} (use simhash(text) for text)"
        )
    keys: list[str] = []
    weights: list = []
    all_int = True
    if isinstance(features, Mapping):
        items = features.items()
        for k, w in items:
            if not isinstance(k, str):
                raise TypeError(f"{name} keys must be str, got {type(k).__name__}")
            w, is_int = _check_weight(w, f"{name}[{k!r}]")
            all_int &= is_int
            keys.append(k)
            weights.append(w)
        return keys, weights, all_int
    if not isinstance(features, Iterable):
        raise TypeError(
            f"{name} must be a mapping or an iterable of str / (str, weight) pairs, got {type(features).__name__}"
        )
    for i, item in enumerate(features):
        if isinstance(item, str):
            keys.append(item)
            weights.append(1)
            continue
        if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            w, is_int = _check_weight(item[1], f"{name}[{i}] weight")
            all_int &= is_int
            keys.append(item[0])
            weights.append(w)
            continue
        raise TypeError(f"{name}[{i}] must be a str or a (str, weight) pair, got {type(item).__name__}")
    return keys, weights, all_int


def _check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed <= _MAX_SEED:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def simhash_features(features: Any, *, seed: int = 0, empty: Any = 0) -> Any:
    """SimHash of caller-supplied features by the pinned core.

    ``features``: a ``Mapping[str, number]``, or an iterable of ``str`` (weight 1)
    and/or ``(str, weight)`` pairs; repeated features add up. No features ->
    ``empty`` (default 0).
    """
    seed = _check_seed(seed)
    keys, weights, all_int = _parse_features(features)
    if not keys:
        return empty
    if not all_int:
        weights = [float(w) for w in weights]
    return _majority(_hash_keys(keys, seed), weights, all_int)


# =========================================================================== Fingerprinter




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
      word tokenizers; not applicable to ``"chars"``).
    - ``weighting``: ``"tf"`` (default), ``"binary"``, ``"logtf"``, ``"tfidf"`` (needs ``idf``).
    - ``idf``: an ``IdfTable`` (see ``fit_idf``).
    - ``top_k``: number of keywords in ``"keywords"`` mode (default 20).
    - ``normalize``: NFKC + casefold first (default True).
    - ``seed``: xxh64 seed, 0 <= seed < 2**64 (default 0).
    - ``algorithm``: ``"simdb"`` (the pinned xxh64 core) or ``"simhash-pypi"``
      (reproduces PyPI ``simhash`` 2.x exactly; takes no other options).
    - ``version``: the fingerprint definition version (only 1 exists).
    """

    tokenizer: str = "default"
    ngram: int | None = None
    stopwords: bool | None = None
    weighting: str | None = None
    idf: IdfTable | None = None
    top_k: int | None = None
    normalize: bool = True
    seed: int = 0
    algorithm: str = "simdb"
    version: int = FINGERPRINT_VERSION

    # ------------------------------------------------------------------ validation
    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if not isinstance(self.algorithm, str):
            raise TypeError(f"algorithm must be str, got {type(self.algorithm).__name__}")
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise TypeError(f"version must be an int, got {type(self.version).__name__}")
        if self.version != FINGERPRINT_VERSION:
            raise ValueError(
                f"version must be {FINGERPRINT_VERSION} (the only fingerprint definition this simdb computes), "
                f"got {self.version}"
            )
        if self.algorithm == "simhash-pypi":
            fixed = dict(tokenizer="chars", ngram=4, stopwords=False, weighting="tf", idf=None, top_k=None,
                         normalize=False, seed=0)
            defaults = dict(tokenizer="default", ngram=None, stopwords=None, weighting=None, idf=None,
                            top_k=None, normalize=True, seed=0)
            for k, v in fixed.items():
                cur = getattr(self, k)
                if cur != defaults[k] and cur != v:
                    raise ValueError(f"{k} cannot be set with algorithm='simhash-pypi' (it fixes {k}={v!r})")
                set_(k, v)
            return
        if not isinstance(self.tokenizer, str):
            raise TypeError(f"tokenizer must be str, got {type(self.tokenizer).__name__}")
        if self.tokenizer not in TOKENIZERS:
            raise ValueError(f"tokenizer must be one of {TOKENIZERS}, got {self.tokenizer!r}")
        if not isinstance(self.normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(self.normalize).__name__}")
        set_("seed", _check_seed(self.seed))
        tok = self.tokenizer
        # ngram
        if self.ngram is None:
            set_("ngram", 4 if tok == "chars" else 1)
        else:
            if isinstance(self.ngram, bool) or not isinstance(self.ngram, int):
                raise TypeError(f"ngram must be an int, got {type(self.ngram).__name__}")
            if self.ngram < 1:
                raise ValueError(f"ngram must be >= 1, got {self.ngram}")
            if tok == "keywords" and self.ngram != 1:
                raise ValueError("ngram must be 1 with tokenizer='keywords'")
        # stopwords
        if self.stopwords is None:
            set_("stopwords", tok != "chars")
        elif not isinstance(self.stopwords, bool):
            raise TypeError(f"stopwords must be a bool, got {type(self.stopwords).__name__}")
        elif tok == "chars" and self.stopwords:
            raise ValueError("stopwords does not apply to tokenizer='chars' (use stopwords=False or leave it unset)")
        # weighting / idf
        if tok == "keywords":
            if self.weighting not in (None, "keywords"):
                raise ValueError("weighting cannot be set with tokenizer='keywords' (jieba's TF-IDF weights are used)")
            set_("weighting", "keywords")
            if self.idf is not None:
                raise ValueError("idf does not apply to tokenizer='keywords'")
        else:
            if self.weighting is None:
                set_("weighting", "tf")
            elif not isinstance(self.weighting, str):
                raise TypeError(f"weighting must be str, got {type(self.weighting).__name__}")
            elif self.weighting not in WEIGHTINGS:
                raise ValueError(f"weighting must be one of {WEIGHTINGS}, got {self.weighting!r}")
            if self.idf is not None:
                if isinstance(self.idf, Mapping):
                    set_("idf", IdfTable.from_dict(self.idf))
                elif not isinstance(self.idf, IdfTable):
                    raise TypeError(f"idf must be an IdfTable, got {type(self.idf).__name__}")
            if self.weighting == "tfidf" and self.idf is None:
                raise ValueError("weighting='tfidf' needs idf=IdfTable (see Fingerprinter.fit_idf)")
            if self.weighting != "tfidf" and self.idf is not None:
                raise ValueError("idf only applies to weighting='tfidf'")
        # top_k
        if tok == "keywords":
            if self.top_k is None:
                set_("top_k", 20)
            elif isinstance(self.top_k, bool) or not isinstance(self.top_k, int):
                raise TypeError(f"top_k must be an int, got {type(self.top_k).__name__}")
            elif self.top_k < 1:
                raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        elif self.top_k is not None:
            raise ValueError("top_k only applies to tokenizer='keywords'")

    # ------------------------------------------------------------------ presets / construction
    @classmethod
    def preset(cls, name: str) -> "Fingerprinter":
        """Named configurations: ``"default"``, ``"simhash-pypi"`` (PyPI simhash 2.x compatible),
        ``"shingles"`` (word 3-gram shingles), ``"chars"`` (4-character shingles)."""
        if not isinstance(name, str):
            raise TypeError(f"name must be str, got {type(name).__name__}")
        presets = {
            "default": {},
            "simhash-pypi": {"algorithm": "simhash-pypi"},
            "shingles": {"ngram": 3},
            "chars": {"tokenizer": "chars"},
        }
        if name not in presets:
            raise ValueError(f"name must be one of {sorted(presets)}, got {name!r}")
        return cls(**presets[name])

    def replace(self, **changes) -> "Fingerprinter":
        return dataclasses.replace(self, **changes)

    def fit_idf(self, texts: Iterable[str], *, min_df: int = 1) -> "Fingerprinter":
        """This configuration with ``weighting='tfidf'`` and an ``IdfTable`` fitted on ``texts``."""
        table = IdfTable.fit(texts, self.replace(weighting="tf", idf=None) if self.idf else self, min_df=min_df)
        return dataclasses.replace(self, weighting="tfidf", idf=table)

    # ------------------------------------------------------------------ serialisation
    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["idf"] = self.idf.to_dict() if self.idf is not None else None
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Fingerprinter":
        if not isinstance(data, Mapping):
            raise TypeError(f"data must be a mapping, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = [k for k in data if k not in names]
        if unknown:
            raise ValueError(f"unknown Fingerprinter option(s): {', '.join(map(str, unknown))}")
        kwargs = dict(data)
        if isinstance(kwargs.get("idf"), Mapping):
            kwargs["idf"] = IdfTable.from_dict(kwargs["idf"])
        return cls(**kwargs)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> "Fingerprinter":
        if not isinstance(text, (str, bytes, bytearray)):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        data = json.loads(text)
        return cls.from_dict(data)

    # ------------------------------------------------------------------ features
    def counts(self, text: str) -> dict[str, int]:
        """Features of ``text`` with their counts (before weighting)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        tok = self.tokenizer
        if self.algorithm == "simhash-pypi":
            from simdb.compat import pypi_tokenize

            return Counter(pypi_tokenize(text))
        if tok == "default" or tok == "words":
            t = _tok.normalize(text) if self.normalize else text
            tokens = _tok.split(t, segment_cjk=tok == "default")
            stop = _stop() if self.stopwords else None
            if self.ngram == 1:
                c = Counter(tokens)
                if stop is not None:
                    for s in stop.intersection(c):
                        del c[s]
                return c
            if stop is not None:
                tokens = [t for t in tokens if t not in stop]
            return Counter(_tok.word_ngrams(tokens, self.ngram))
        if tok == "chars":
            return Counter(_tok.char_ngrams(text, self.ngram, normalize_text=self.normalize))
        # keywords
        return dict.fromkeys((w for w, _ in self._keywords(text)), 1)

    def _keywords(self, text: str) -> list[tuple[str, float]]:
        return _tok.jieba_keywords(text, self.top_k, stopwords_=self.stopwords, normalize_text=self.normalize)

    def features(self, text: str) -> dict[str, int | float]:
        """The weighted features of ``text`` this configuration hashes."""
        if self.tokenizer == "keywords" and self.algorithm == "simdb":
            if not isinstance(text, str):
                raise TypeError(f"text must be str, got {type(text).__name__}")
            return dict(self._keywords(text))
        return dict(apply_weighting(self.counts(text), self.weighting, self.idf))

    @property
    def int_weights(self) -> bool:
        """True when weights are integers (tf, binary): bit sums are then exact integers."""
        return self.weighting in ("tf", "binary")

    # ------------------------------------------------------------------ fingerprints
    def fingerprint(self, text: str, empty: Any = 0) -> Any:
        """The 64-bit SimHash of ``text`` (an int in [0, 2**64)); ``empty`` when it has no features."""
        if self.algorithm == "simhash-pypi":
            from simdb.compat import pypi_simhash

            if not isinstance(text, str):
                raise TypeError(f"text must be str, got {type(text).__name__}")
            return pypi_simhash(text)
        if self._fast:
            return self._fingerprint_tokens(text, empty)
        feats = self.features(text)
        if not feats:
            return empty
        keys = list(feats)
        weights = list(feats.values())
        return _majority(_hash_keys(keys, self.seed, self.ngram == 1 or self.tokenizer == "chars"),
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
            raise TypeError(f"text must be str, got {type(text).__name__}")
        binary = self.weighting == "binary"
        if self.tokenizer == "chars":
            n = self.ngram
            chars = _tok.char_stream(text, normalize_text=self.normalize)
            if not binary and len(chars) > n and n < 32 and chars.isascii():
                hashes = _xxh64_windows(chars.encode("ascii"), n, self.seed)
            else:
                feats = [chars] if 0 < len(chars) <= n else [chars[i : i + n] for i in range(len(chars) - n + 1)]
                cache = _cache_for(self.seed, False, len(feats))
                ids = _ids(cache, feats)
                hashes = cache.hashes[np.unique(ids) if binary else ids]
        else:
            t = _tok.normalize(text) if self.normalize else text
            tokens = _tok.split(t, segment_cjk=self.tokenizer == "default")
            if self.ngram == 1:
                cache = _cache_for(self.seed, self.stopwords, len(tokens))
                ids = _ids(cache, tokens)
                if self.stopwords:
                    ids = ids[ids != 0]
                hashes = cache.hashes[np.unique(ids) if binary else ids]
            else:
                if self.stopwords:
                    stop = _stop()
                    tokens = [w for w in tokens if w not in stop]
                feats = _tok.word_ngrams(tokens, self.ngram)
                if binary:
                    feats = list(set(feats))
                hashes = _hash_keys(feats, self.seed, use_cache=False)
        n = len(hashes)
        if n == 0:
            return empty
        bits = _unpack(hashes)
        if n <= len(_ONES32):  # (a shared ones vector: no allocation per call on short texts)
            p = _ONES32[:n] @ bits.astype(np.float32)
        elif n < _F32_EXACT:
            p = np.ones(n, dtype=np.float32) @ bits.astype(np.float32)
        else:
            p = bits.sum(axis=0, dtype=np.int64)
        return _pack(p > n / 2)  # p holds exact integers, n / 2 is exact: the same as 2 * p > n

    def fingerprint_features(self, features: Any, empty: Any = 0) -> Any:
        """SimHash of caller-supplied features with this configuration's hash (seed / algorithm)."""
        if self.algorithm == "simhash-pypi":
            from simdb.compat import pypi_simhash

            if isinstance(features, (str, bytes, bytearray)):
                raise TypeError("features must be a mapping or an iterable, not str/bytes")
            return pypi_simhash(features)
        return simhash_features(features, seed=self.seed, empty=empty)

    def many(self, texts: Iterable[str], workers: int | None = None, empty: Any = 0) -> list:
        """Fingerprints of ``texts`` in order; ``workers >= 2`` uses a process pool.

        The pool (:mod:`simdb.parallel`: one per worker count, started once, reused
        by later calls and shut down at exit) uses the ``forkserver`` start method
        where available, else ``spawn``, so call it from code guarded by
        ``if __name__ == "__main__":`` in scripts. Texts travel in chunks of at
        least 64k characters and fingerprints come back as arrays; the values are
        those of one process.
        """
        texts = _tok._as_text_list(texts)
        workers = _parallel.check_workers(workers)
        if workers is None or workers == 1 or len(texts) < 2:
            return self._many_local(texts, empty)
        return _many_pool(self, texts, workers, empty)

    def _many_local(self, texts: list[str], empty: Any) -> list:
        # Per-document BLAS products beat cross-document vectorisation here
        # (np.add.reduceat over the (n, 64) bit matrix measured ~10x slower).
        f = self.fingerprint
        return [f(t, empty) for t in texts]


@lru_cache(maxsize=1)
def _stop() -> frozenset[str]:
    return _tok.stopwords()


# =========================================================================== process pool

#: shut down the worker pools ``Fingerprinter.many(workers=N)`` started (simdb.parallel)
shutdown_pools = _parallel.shutdown


def _many_chunk(fp: Fingerprinter, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """In a worker: (uint64 fingerprints, bool "no features") of a chunk, as arrays (cheap to send)."""
    out = np.zeros(len(texts), dtype=np.uint64)
    none = np.zeros(len(texts), dtype=bool)
    for i, v in enumerate(fp._many_local(texts, None)):
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
    # chunks of at least 64k characters (transfer and task overhead stay small), at
    # least 4 per worker (load balance), at most 4M characters (memory)
    total = sum(map(len, texts))
    target = max(1 << 16, min(1 << 22, total // (workers * 4) + 1))
    out: list = []
    for fps, none in _parallel.imap(partial(_many_chunk, fp), _text_chunks(texts, target), workers):
        vals = fps.tolist()
        if none.any():
            for i in np.flatnonzero(none).tolist():
                vals[i] = empty
        out.extend(vals)
    return out


# =========================================================================== simhash()


@lru_cache(maxsize=64)
def _fingerprinter_for(items: tuple) -> Fingerprinter:
    return Fingerprinter(**dict(items))


_TEXT_ONLY = ("tokenizer", "ngram", "stopwords", "weighting", "idf", "top_k", "normalize")


def simhash(text_or_features: Any, *, empty: Any = 0, **options: Any) -> Any:
    """64-bit SimHash (int in [0, 2**64)) of a text or of weighted features.

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
        raise TypeError(
            "text_or_features must be a str, a Mapping[str, number] or an iterable of str / (str, weight), "
            f"got {type(text_or_features).__name__}"
        )
    bad = [k for k in options if k in _TEXT_ONLY]
    if bad:
        raise ValueError(f"option {bad[0]!r} applies to text input only, not to features")
    return fp.fingerprint_features(text_or_features, empty=empty)


def query_fingerprint(query: Any, fingerprinter: Fingerprinter | None = None) -> int | None:
    """A search's query as an unsigned fingerprint: an int is taken as is, a str is fingerprinted.

    Returns None for a text with no features (it matches nothing). Shared by the
    SQLAlchemy and Django integrations, so both read a query the same way.
    """
    if isinstance(query, bool):
        raise TypeError("query must be a text or an int fingerprint, got bool")
    if isinstance(query, int):
        if not 0 <= query <= MASK64:
            raise ValueError(f"fingerprint must be in [0, 2**64), got {query}")
        return query
    if isinstance(query, str):
        return (fingerprinter or Fingerprinter()).fingerprint(query, empty=None)
    raise TypeError(f"query must be a text or an int fingerprint, got {type(query).__name__}")
