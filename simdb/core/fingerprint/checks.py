"""What a ``Fingerprinter`` accepts: its options, caller-supplied features, seeds.

Every check raises a ``TypeError`` or ``ValueError`` naming the option or item.
``validate_options`` is ``Fingerprinter.__post_init__``,
split into one step per option group so each rule reads on its own; it fills in
the per-tokenizer defaults through ``set_`` (the dataclass is frozen).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

from simdb.core.bits import MASK64
from simdb.core.fingerprint.weighting import WEIGHTINGS, IdfTable
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "ALGORITHMS",
    "FINGERPRINT_VERSION",
    "TOKENIZERS",
    "check_seed",
    "check_weight",
    "parse_features",
    "stopword_fraction",
    "validate_options",
]

FINGERPRINT_VERSION = 1
TOKENIZERS = ("default", "words", "chars", "keywords", "tokens")
#: tokenizers whose features are single words (a stopword weight applies to them)
WORD_TOKENIZERS = ("default", "words", "tokens")
ALGORITHMS = ("simdb", "simhash-pypi")

Setter = Callable[[str, Any], None]


def check_weight(w: Any, where: str) -> tuple[int | float, bool]:
    if isinstance(w, bool) or not isinstance(w, numbers.Real):
        raise InvalidTypeError(f"{where} must be a real number, got {type(w).__name__}")
    if isinstance(w, numbers.Integral):
        return int(w), True
    w = float(w)
    if not math.isfinite(w):
        raise InvalidArgumentError(f"{where} must be finite, got {w}")
    return w, False


def parse_features(features: Any, name: str = "features") -> tuple[list[str], list, bool]:
    """Mapping / iterable of str / iterable of (str, weight) -> (keys, weights, all_int)."""
    if isinstance(features, (str, bytes, bytearray)):
        raise InvalidTypeError(
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
                raise InvalidTypeError(f"{name} keys must be str, got {type(k).__name__}")
            w, is_int = check_weight(w, f"{name}[{k!r}]")
            all_int &= is_int
            keys.append(k)
            weights.append(w)
        return keys, weights, all_int
    if not isinstance(features, Iterable):
        raise InvalidTypeError(
            f"{name} must be a mapping or an iterable of str / (str, weight) pairs, got {type(features).__name__}"
        )
    for i, item in enumerate(features):
        if isinstance(item, str):
            keys.append(item)
            weights.append(1)
            continue
        if isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[0], str):
            w, is_int = check_weight(item[1], f"{name}[{i}] weight")
            all_int &= is_int
            keys.append(item[0])
            weights.append(w)
            continue
        raise InvalidTypeError(f"{name}[{i}] must be a str or a (str, weight) pair, got {type(item).__name__}")
    return keys, weights, all_int


def check_seed(seed: Any) -> int:
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise InvalidTypeError(f"seed must be an int, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed <= MASK64:
        raise InvalidArgumentError(f"seed must be in [0, 2**64), got {seed}")
    return seed


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def validate_options(fp: Any, set_: Setter) -> None:
    """Check ``fp``'s options and fill in the per-tokenizer defaults (``Fingerprinter.__post_init__``)."""
    _check_algorithm_and_version(fp)
    if fp.algorithm == "simhash-pypi":
        _fix_pypi_options(fp, set_)
        return
    _check_tokenizer(fp)
    set_("seed", check_seed(fp.seed))
    _check_ngram(fp, set_)
    _check_stopwords(fp, set_)
    if fp.tokenizer == "keywords":
        _check_keywords_weighting(fp, set_)
    else:
        _check_weighting(fp, set_)
    _check_top_k(fp, set_)
    if not isinstance(fp.stopwords, bool) and fp.weighting != "tf":
        raise InvalidArgumentError(f"a stopword weight (stopwords={fp.stopwords!r}) needs weighting='tf', got {fp.weighting!r}")


def _check_algorithm_and_version(fp: Any) -> None:
    if not isinstance(fp.algorithm, str):
        raise InvalidTypeError(f"algorithm must be str, got {type(fp.algorithm).__name__}")
    if fp.algorithm not in ALGORITHMS:
        raise InvalidArgumentError(f"algorithm must be one of {ALGORITHMS}, got {fp.algorithm!r}")
    if not _is_int(fp.version):
        raise InvalidTypeError(f"version must be an int, got {type(fp.version).__name__}")
    if fp.version != FINGERPRINT_VERSION:
        raise InvalidArgumentError(
            f"version must be {FINGERPRINT_VERSION} (the only fingerprint definition this simdb computes), "
            f"got {fp.version}"
        )


_PYPI_FIXED = dict(tokenizer="chars", ngram=4, stopwords=False, weighting="tf", idf=None, top_k=None,
                   normalize=False, seed=0)
_DEFAULTS = dict(tokenizer="default", ngram=None, stopwords=None, weighting=None, idf=None,
                 top_k=None, normalize=True, seed=0)


def _fix_pypi_options(fp: Any, set_: Setter) -> None:
    """``simhash-pypi`` fixes every other option: an option left at its default or set to the fixed value is fine."""
    for k, v in _PYPI_FIXED.items():
        cur = getattr(fp, k)
        if cur != _DEFAULTS[k] and cur != v:
            raise InvalidArgumentError(f"{k} cannot be set with algorithm='simhash-pypi' (it fixes {k}={v!r})")
        set_(k, v)


def _check_tokenizer(fp: Any) -> None:
    if not isinstance(fp.tokenizer, str):
        raise InvalidTypeError(f"tokenizer must be str, got {type(fp.tokenizer).__name__}")
    if fp.tokenizer not in TOKENIZERS:
        raise InvalidArgumentError(f"tokenizer must be one of {TOKENIZERS}, got {fp.tokenizer!r}")
    if not isinstance(fp.normalize, bool):
        raise InvalidTypeError(f"normalize must be a bool, got {type(fp.normalize).__name__}")


def _check_ngram(fp: Any, set_: Setter) -> None:
    if fp.ngram is None:
        set_("ngram", 4 if fp.tokenizer == "chars" else 1)
        return
    if not _is_int(fp.ngram):
        raise InvalidTypeError(f"ngram must be an int, got {type(fp.ngram).__name__}")
    if fp.ngram < 1:
        raise InvalidArgumentError(f"ngram must be >= 1, got {fp.ngram}")
    if fp.tokenizer == "keywords" and fp.ngram != 1:
        raise InvalidArgumentError("ngram must be 1 with tokenizer='keywords'")


def stopword_fraction(value: Any) -> tuple[int, int]:
    """A stopword weight as (numerator, denominator): a fraction p/q in (0, 1) with q <= 16.

    Why a small fraction: the fingerprint then weighs a stopword occurrence ``p`` and any
    other word ``q``, integers, so the bit sums are exact (the pinned rule has no float ties)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidTypeError(f"stopwords must be a bool or a number in (0, 1), got {type(value).__name__}")
    return _fraction_of(float(value), repr(value))


@lru_cache(maxsize=64)
def _fraction_of(x: float, shown: str) -> tuple[int, int]:
    """:func:`stopword_fraction` of a float, cached: a fingerprint reads it once per text
    (``Fingerprinter.stopword_weights``), where ``limit_denominator`` cost ~25 us."""
    frac = Fraction(x).limit_denominator(16) if math.isfinite(x) else Fraction(0)
    if not 0 < frac < 1 or abs(float(frac) - x) > 1e-12:
        raise InvalidArgumentError(
            f"stopwords as a weight must be a fraction p/q in (0, 1) with q <= 16 (e.g. 2/3), got {shown}"
        )
    return frac.numerator, frac.denominator


def _check_stopwords(fp: Any, set_: Setter) -> None:
    if fp.stopwords is None:
        set_("stopwords", fp.tokenizer != "chars")
    elif isinstance(fp.stopwords, bool):
        if fp.tokenizer == "chars" and fp.stopwords:
            raise InvalidArgumentError("stopwords does not apply to tokenizer='chars' (use stopwords=False or leave it unset)")
    else:
        num, den = stopword_fraction(fp.stopwords)
        if fp.tokenizer not in WORD_TOKENIZERS or fp.ngram != 1:
            raise InvalidArgumentError(
                f"a stopword weight (stopwords={fp.stopwords!r}) applies to single words only: "
                f"tokenizer in {WORD_TOKENIZERS} with ngram=1"
            )
        set_("stopwords", num / den)


def _check_keywords_weighting(fp: Any, set_: Setter) -> None:
    if fp.weighting not in (None, "keywords"):
        raise InvalidArgumentError("weighting cannot be set with tokenizer='keywords' (jieba's TF-IDF weights are used)")
    set_("weighting", "keywords")
    if fp.idf is not None:
        raise InvalidArgumentError("idf does not apply to tokenizer='keywords'")


def _check_weighting(fp: Any, set_: Setter) -> None:
    if fp.weighting is None:
        set_("weighting", "tf")
    elif not isinstance(fp.weighting, str):
        raise InvalidTypeError(f"weighting must be str, got {type(fp.weighting).__name__}")
    elif fp.weighting not in WEIGHTINGS:
        raise InvalidArgumentError(f"weighting must be one of {WEIGHTINGS}, got {fp.weighting!r}")
    if fp.idf is not None:
        if isinstance(fp.idf, Mapping):
            set_("idf", IdfTable.from_dict(fp.idf))
        elif not isinstance(fp.idf, IdfTable):
            raise InvalidTypeError(f"idf must be an IdfTable, got {type(fp.idf).__name__}")
    if fp.weighting == "tfidf" and fp.idf is None:
        raise InvalidArgumentError("weighting='tfidf' needs idf=IdfTable (see Fingerprinter.fit_idf)")
    if fp.weighting != "tfidf" and fp.idf is not None:
        raise InvalidArgumentError("idf only applies to weighting='tfidf'")


def _check_top_k(fp: Any, set_: Setter) -> None:
    if fp.tokenizer != "keywords":
        if fp.top_k is not None:
            raise InvalidArgumentError("top_k only applies to tokenizer='keywords'")
        return
    if fp.top_k is None:
        set_("top_k", 20)
    elif not _is_int(fp.top_k):
        raise InvalidTypeError(f"top_k must be an int, got {type(fp.top_k).__name__}")
    elif fp.top_k < 1:
        raise InvalidArgumentError(f"top_k must be >= 1, got {fp.top_k}")
