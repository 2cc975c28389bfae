"""The candidate Fingerprinter and verification settings of the model helpers on a host app's
own tables, pinned.

A simdb collection records its shingle scheme in its config (``config["verify"]["scheme"]``), so
a simdb release that changes :data:`simdb.core.sketch.SCHEME` keeps answering old collections with
their own scheme. A host table (:mod:`simdb.sqlalchemy.verified`, :mod:`simdb.django.verified`)
has no such record: its sketches are whatever the model computed when each row was written. If
the models followed ``simdb.core.sketch.SCHEME``, an upgrade that changed it would compare new query
sketches with old stored ones: different hash values for the same shingles, Jaccard near 0, every
near-duplicate silently lost. So the models use :data:`MODEL_SCHEME`, a literal that a release
may not change (a new scheme would be a new constant and an explicit, documented data migration);
a model may choose another scheme explicitly (``Verifier(scheme=...)``), then it owns that choice.
The sketch size is pinned for the same reason (:data:`MODEL_SKETCH_SIZE`: main moved the default
of new collections from 256 to 384 values; stored sketches keep the size they were written with,
and the Jaccard of a 256-value sketch with a 384-value one is not the bottom-k estimate of
either), and the threshold and radius so that a model's rule does not move under it either.

The same holds for the fingerprint in ``fp``: a collection records its Fingerprinter, a host table
does not, so the models use :func:`model_fingerprinter`, whose options are written out here
(:data:`MODEL_FINGERPRINTER_OPTIONS`) rather than read from the preset of new collections. Today
they equal ``Fingerprinter.preset("verified")`` (the sketch's token stream, stopwords at 2/3
weight), the candidate whose radius ``K = 11`` was measured on real paragraphs with edited
copies: pairs at Jaccard >= 0.8 within 11 bits, English 0.991, Chinese 0.992
(:data:`simdb.core.fingerprint.VERIFIED_OPTIONS`, docs/near-duplicates.md).
"""

from __future__ import annotations

from functools import lru_cache

from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import SCHEMES, Verifier
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "MODEL_FINGERPRINTER_OPTIONS",
    "MODEL_K",
    "MODEL_MIN_JACCARD",
    "MODEL_SCHEME",
    "MODEL_SKETCH_SIZE",
    "check_model_verifier",
    "model_fingerprinter",
    "model_verifier",
]

#: options of the models' candidate Fingerprinter, written out (never follows a preset implicitly)
MODEL_FINGERPRINTER_OPTIONS: dict = {"tokenizer": "tokens", "stopwords": 2 / 3}

#: the shingle scheme of the model helpers' sketches (never follows simdb.core.sketch.SCHEME implicitly)
MODEL_SCHEME = "tok3-xxh64-v3"
#: values per stored sketch (the size of new collections' sketches when written; never follows it)
MODEL_SKETCH_SIZE = 384
#: the rule: Jaccard >= 0.8 among candidates within 11 bits (measured for model_fingerprinter)
MODEL_MIN_JACCARD = 0.8
MODEL_K = 11


@lru_cache(maxsize=1)
def model_fingerprinter() -> Fingerprinter:
    """The candidate Fingerprinter of every verified model (built once per process)."""
    return Fingerprinter(**MODEL_FINGERPRINTER_OPTIONS)


def model_verifier() -> Verifier:
    """The default verifier of a verified model: threshold 0.8, radius 11, 384 values, :data:`MODEL_SCHEME`."""
    return Verifier(k=MODEL_K, min_jaccard=MODEL_MIN_JACCARD, size=MODEL_SKETCH_SIZE, scheme=MODEL_SCHEME)


def check_model_verifier(value: object, where: str) -> Verifier:
    """``value`` if it is a :class:`~simdb.core.sketch.Verifier` with a scheme this simdb computes."""
    if not isinstance(value, Verifier):
        raise InvalidTypeError(f"{where} must be a simdb.core.sketch.Verifier, got {type(value).__name__}")
    if value.scheme not in SCHEMES:
        raise InvalidArgumentError(f"{where}: shingle scheme {value.scheme!r} is unknown to this simdb (it knows {list(SCHEMES)})")
    return value
