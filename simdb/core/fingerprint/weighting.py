"""Feature weights: term frequency, binary, 1+log(tf), and TF-IDF with a fitted ``IdfTable``.

Weights are computed from the per-document feature counts ``tf`` (ints):

- ``"tf"``: ``w = tf`` (an int: the bit sums are exact integers)
- ``"binary"``: ``w = 1``
- ``"logtf"``: ``w = 1.0 + log(tf)`` (natural log, IEEE double)
- ``"tfidf"``: ``w = tf * idf(feature)`` with ``idf = log((1 + N) / (1 + df)) + 1.0``
  (N documents in the fitting corpus, df = documents containing the feature;
  a feature never seen has df = 0).
"""

from __future__ import annotations

import json
import math
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from simdb.core import tokenize as _tok
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["WEIGHTINGS", "IdfTable", "apply_weighting", "default_counts"]

WEIGHTINGS = ("tf", "binary", "logtf", "tfidf")


class IdfTable:
    """Document frequencies fitted on a corpus; immutable, hashable and JSON-serialisable.

    ``IdfTable.fit(texts, fingerprinter)`` counts, for every feature the
    fingerprinter's tokenizer produces, how many texts contain it. Two tables
    with the same counts compare (and serialise) equal, so a ``Fingerprinter``
    holding a table stays a value that a store can record and compare.
    """

    __slots__ = ("_n_docs", "_df", "_hash", "_idf")
    _n_docs: int
    _df: dict[str, int]
    _hash: int | None
    _idf: dict[str, float] | None

    def __init__(self, df: Mapping[str, int], n_docs: int):
        if isinstance(n_docs, bool) or not isinstance(n_docs, numbers.Integral):
            raise InvalidTypeError(f"n_docs must be an int, got {type(n_docs).__name__}")
        n_docs = int(n_docs)
        if n_docs < 0:
            raise InvalidArgumentError(f"n_docs must be >= 0, got {n_docs}")
        if not isinstance(df, Mapping):
            raise InvalidTypeError(f"df must be a mapping of feature -> document count, got {type(df).__name__}")
        clean: dict[str, int] = {}
        for k, v in df.items():
            if not isinstance(k, str):
                raise InvalidTypeError(f"df keys must be str, got {type(k).__name__}")
            if isinstance(v, bool) or not isinstance(v, numbers.Integral):
                raise InvalidTypeError(f"df[{k!r}] must be an int, got {type(v).__name__}")
            v = int(v)
            if not 0 < v <= n_docs:
                raise InvalidArgumentError(f"df[{k!r}] must be in [1, n_docs={n_docs}], got {v}")
            clean[k] = v
        object.__setattr__(self, "_n_docs", n_docs)
        object.__setattr__(self, "_df", dict(sorted(clean.items())))
        object.__setattr__(self, "_hash", None)
        object.__setattr__(self, "_idf", None)

    def __setattr__(self, name, value):
        raise AttributeError("IdfTable is immutable")

    # -- construction
    @classmethod
    def fit(cls, texts: Iterable[str], fingerprinter: Any = None, *, min_df: int = 1) -> IdfTable:
        """Count document frequencies of ``fingerprinter``'s features over ``texts``.

        ``fingerprinter`` is a ``Fingerprinter`` (anything with a ``counts(text)``
        method giving a text's features); only its feature extraction (tokenizer,
        ngram, stopwords, normalize) is used. The default is the default
        pipeline's features (``Fingerprinter().counts``), computed here from
        :mod:`simdb.core.tokenize` so that this module need not import
        :mod:`simdb.core.fingerprint` (which imports it). Features in fewer than
        ``min_df`` texts are left out (they then count as unseen).
        """
        counts = default_counts if fingerprinter is None else getattr(fingerprinter, "counts", None)
        if not callable(counts):
            raise InvalidTypeError(f"fingerprinter must be a Fingerprinter, got {type(fingerprinter).__name__}")
        if isinstance(min_df, bool) or not isinstance(min_df, int):
            raise InvalidTypeError(f"min_df must be an int, got {type(min_df).__name__}")
        if min_df < 1:
            raise InvalidArgumentError(f"min_df must be >= 1, got {min_df}")
        if isinstance(texts, (str, bytes)):
            raise InvalidTypeError("texts must be an iterable of str, not a single str/bytes")
        df: dict[str, int] = {}
        n = 0
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise InvalidTypeError(f"texts[{i}] must be str, got {type(text).__name__}")
            n += 1
            for f in counts(text):
                df[f] = df.get(f, 0) + 1
        if min_df > 1:
            df = {k: v for k, v in df.items() if v >= min_df}
        return cls(df, n)

    # -- lookups
    @property
    def n_docs(self) -> int:
        return self._n_docs

    def df(self, feature: str) -> int:
        return self._df.get(feature, 0)

    def idf(self, feature: str) -> float:
        """``log((1 + N) / (1 + df)) + 1.0``; an unseen feature has df = 0."""
        table = self._idf_map()
        v = table.get(feature)
        return v if v is not None else self._unseen()

    def _unseen(self) -> float:
        return math.log((1 + self._n_docs) / 1) + 1.0

    def _idf_map(self) -> dict[str, float]:
        m = self._idf
        if m is None:
            n1 = 1 + self._n_docs
            m = {k: math.log(n1 / (1 + v)) + 1.0 for k, v in self._df.items()}
            object.__setattr__(self, "_idf", m)
        return m

    def __len__(self) -> int:
        return len(self._df)

    def __contains__(self, feature: object) -> bool:
        return feature in self._df

    # -- value semantics
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IdfTable):
            return NotImplemented
        return self._n_docs == other._n_docs and self._df == other._df

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self._n_docs, frozenset(self._df.items())))
            object.__setattr__(self, "_hash", h)
        return h

    def __repr__(self) -> str:
        return f"IdfTable(n_docs={self._n_docs}, features={len(self._df)})"

    def __reduce__(self):
        return (IdfTable, (self._df, self._n_docs))

    # -- serialisation
    def to_dict(self) -> dict[str, Any]:
        return {"n_docs": self._n_docs, "df": dict(self._df)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IdfTable:
        if not isinstance(data, Mapping):
            raise InvalidTypeError(f"data must be a mapping, got {type(data).__name__}")
        unknown = set(data) - {"n_docs", "df"}
        if unknown:
            raise InvalidArgumentError(f"unknown IdfTable field(s): {', '.join(sorted(map(str, unknown)))}")
        if "n_docs" not in data or "df" not in data:
            raise InvalidArgumentError("IdfTable data needs both 'n_docs' and 'df'")
        return cls(data["df"], data["n_docs"])

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> IdfTable:
        if not isinstance(text, (str, bytes)):
            raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
        return cls.from_dict(json.loads(text))


def apply_weighting(counts: dict[str, int], weighting: str, idf: IdfTable | None = None) -> dict:
    """Turn per-document feature counts into weights (in place when possible; returns the dict)."""
    if weighting == "tf":
        return counts
    if weighting == "binary":
        return dict.fromkeys(counts, 1)
    if weighting == "logtf":
        log = math.log
        return {k: 1.0 + log(v) for k, v in counts.items()}
    if weighting == "tfidf":
        if idf is None:
            raise InvalidArgumentError("weighting='tfidf' needs an idf table")
        table = idf._idf_map()
        unseen = idf._unseen()
        get = table.get
        return {k: v * get(k, unseen) for k, v in counts.items()}
    raise InvalidArgumentError(f"weighting must be one of {WEIGHTINGS}, got {weighting!r}")


@lru_cache(maxsize=1)
def _stopwords() -> frozenset[str]:
    return _tok.stopwords()


def default_counts(text: str) -> Counter[str]:
    """The default pipeline's features of ``text`` with their counts: ``Fingerprinter().counts(text)``.

    NFKC + casefold, ``\\w+`` words with Han runs segmented by jieba, the shipped
    stopwords dropped (tests/test_house.py checks it equals ``Fingerprinter().counts``).
    """
    if not isinstance(text, str):
        raise InvalidTypeError(f"text must be str, got {type(text).__name__}")
    c = Counter(_tok.split(_tok.normalize(text), segment_cjk=True))
    for s in _stopwords().intersection(c):
        del c[s]
    return c
