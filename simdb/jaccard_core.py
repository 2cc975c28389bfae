"""The pure part of the legacy Jaccard collections (issue 8, ``SimhashIndex(..., jaccard=True)``):
exact Jaccard of shingle sets, thresholds -> SimHash radius, the collection's stored MinHash
configuration, a text's shingles and band keys, and the advisory-lock keys of band writers.

No database here: the store's half (SQL for rows, bands, search, pairs) is
:mod:`simdb.store.jaccard_search`, :mod:`simdb.store.jaccard_write` and
:mod:`simdb.store.jaccard_pairs`; :mod:`simdb.jaccard` gathers the public names.
"""

from __future__ import annotations

from collections.abc import Iterable

from simdb.bits import to_signed
from simdb.errors import CollectionConfigError, InvalidArgumentError, InvalidTypeError
from simdb.fingerprint import Fingerprinter
from simdb.minhash import MinHasher
from simdb.shingles import SCHEME
from simdb.shingles import shingles as _shingles

__all__ = [
    "CANDIDATE_OPTIONS",
    "CONFIG_KEY",
    "LOCK_TAG",
    "MIN_THRESHOLD",
    "SQL_JACCARD",
    "THRESHOLD_K",
    "candidate_fingerprinter",
    "check_min_jaccard",
    "collection_config",
    "jaccard",
    "k_for_threshold",
    "lock_keys",
    "minhasher_for",
    "minhasher_of",
    "prepare",
]

# threshold -> k for SimHash candidates: the smallest k whose candidate recall was
# >= 0.95 for the pairs at or above the threshold on both the English and the
# Chinese corpus of benchmarks/bench_quality.py (k = 11 where none reaches it:
# at 0.8 that is recall .994 English / .970 Chinese; at 0.7, .978 / .948).
# A threshold between rows uses the row below it. See the table in docs/jaccard.md.
THRESHOLD_K: dict[float, int] = {
    0.95: 7,
    0.9: 9,
    0.8: 11,
    0.7: 11,
}


MIN_THRESHOLD = min(THRESHOLD_K)


# Options of the candidate Fingerprinter: words (jieba for CJK runs), TF weights,
# stopwords kept. Everything else is the default pipeline.
CANDIDATE_OPTIONS: dict = {"stopwords": False, "weighting": "tf"}


SQL_JACCARD = "icount({a} & {b})::float8 / NULLIF(icount({a} | {b}), 0)"


def jaccard(a: Iterable[int] | None, b: Iterable[int] | None) -> float | None:
    """Exact Jaccard similarity of two shingle sets; None when both are empty/None."""
    sa = set(a or ())
    sb = set(b or ())
    union = len(sa | sb)
    if union == 0:
        return None
    return len(sa & sb) / union


def _check_threshold(min_jaccard) -> float:
    if isinstance(min_jaccard, bool) or not isinstance(min_jaccard, (int, float)):
        raise InvalidTypeError(f"min_jaccard must be a number, not {type(min_jaccard).__name__}")
    t = float(min_jaccard)
    if not (0.0 < t <= 1.0):
        raise InvalidArgumentError(f"min_jaccard must be in (0, 1], got {min_jaccard!r}")
    return t


def k_for_threshold(min_jaccard: float) -> int:
    """Stage-1 Hamming radius for a Jaccard threshold, from :data:`THRESHOLD_K`.

    Below :data:`MIN_THRESHOLD` SimHash candidates cannot reach the recall the
    table promises even at k = 11, so that is a ValueError (use MinHash banding,
    :mod:`simdb.minhash`, or a sequential scan with ``simdb_jaccard`` instead).
    """
    t = _check_threshold(min_jaccard)
    if t < MIN_THRESHOLD:
        raise ValueError(
            f"min_jaccard={min_jaccard!r} is below {MIN_THRESHOLD}: SimHash candidates (k <= 11) "
            "miss too many pairs there; use a sequential scan with simdb_jaccard() in SQL"
        )
    return THRESHOLD_K[max(x for x in THRESHOLD_K if x <= t)]


def candidate_fingerprinter():
    """The Fingerprinter whose fingerprints a Jaccard collection stores in ``fp``."""
    return Fingerprinter(**CANDIDATE_OPTIONS)


CONFIG_KEY = "jaccard"


#: high 12 bits of the advisory-lock keys of Jaccard writers (dedup's block locks use 0x5D8)
LOCK_TAG = 0x5D9


def collection_config(minhasher: MinHasher | None = None) -> dict:
    """What a Jaccard collection records under ``config["jaccard"]``."""
    mh = minhasher or MinHasher()
    return {"scheme": SCHEME, "minhash": mh.to_dict()}


def minhasher_of(config: dict) -> MinHasher:
    """The MinHasher recorded in a collection's ``config["jaccard"]``."""
    scheme = config.get("scheme")
    if scheme != SCHEME:
        raise ValueError(f"collection uses shingle scheme {scheme!r}; this simdb knows {SCHEME!r}")
    return MinHasher.from_dict(config.get("minhash") or {})


def prepare(text: str, mh: MinHasher) -> tuple[list[int] | None, list[int] | None]:
    """(shingles, band keys) of a text; (None, None) when it has no shingles."""
    sh = _shingles(text)
    if not sh:
        return None, None
    return sh, mh.keys_for(sh)


def check_min_jaccard(min_jaccard) -> float:
    """Validate a Jaccard threshold: a number in (0, 1]."""
    return _check_threshold(min_jaccard)


def lock_keys(collection_id: int, bands: list[int]) -> list[int]:
    """Sorted advisory-lock keys (signed bigints) for a Jaccard writer's band keys.

    Layout: 12-bit tag | 20 bits of the collection id | 32-bit band key. Two texts
    that are candidates of each other share a band key, hence a lock.
    """
    cid = int(collection_id) & 0xFFFFF
    base = (LOCK_TAG << 52) | (cid << 32)
    return sorted({to_signed(base | (int(b) & 0xFFFFFFFF)) for b in bands})


def minhasher_for(name: str, stored_config: dict, want: bool | None) -> MinHasher | None:
    """The MinHasher of a collection (None: not a Jaccard collection), checking ``jaccard=``.

    ``want=None`` takes whatever the collection records; ``True`` requires a Jaccard
    collection; ``False`` requires a plain one.
    """
    cfg = stored_config.get(CONFIG_KEY) if isinstance(stored_config, dict) else None
    if want and cfg is None:
        raise CollectionConfigError(
            f"collection {name!r} was created without jaccard=True, so it keeps no shingle sets; "
            "create a new collection with jaccard=True (and re-add its texts) for Jaccard answers"
        )
    if want is False and cfg is not None:
        raise CollectionConfigError(
            f"collection {name!r} is a Jaccard collection (created with jaccard=True); open it with jaccard=None"
        )
    return None if cfg is None else minhasher_of(cfg)
