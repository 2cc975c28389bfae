"""What a verified collection stores for a batch of texts, computed together: the candidate
fingerprints and the bottom-k sketches (and, through ``each_block``, the band keys).

Pure (no database). Why batched: a text's sketch is a handful of vector operations on ~100-250
values, where numpy's per-call overhead would dominate; the sketches of a batch are computed in one
set of array operations (:func:`simdb.core.sketch.chars.grouped_sketches`) next to the batched
fingerprints (``Fingerprinter.many``). One text's features are its rule's to compute
(:meth:`simdb.index.rules.BandedRule.text_features`).
"""

from __future__ import annotations

from simdb.core.fingerprint import VERIFIED_OPTIONS, Fingerprinter
from simdb.core.sketch import SCHEME, Verifier
from simdb.core.sketch.chars import BlockHook, grouped_sketches
from simdb.core.sketch.compare import SketchRows
from simdb.errors import InvalidArgumentError

__all__ = ["candidate_fingerprinter", "fingerprints_and_sketches", "sketch_texts"]

_VERIFIED = Fingerprinter(**VERIFIED_OPTIONS)


def candidate_fingerprinter() -> Fingerprinter:
    """The Fingerprinter of verified collections: ``Fingerprinter.preset("verified")``
    (the sketch's token stream, stopwords at 2/3 weight; why: :data:`simdb.core.fingerprint.VERIFIED_OPTIONS`)."""
    return _VERIFIED


def fingerprints_and_sketches(
    texts: list[str], fingerprinter: Fingerprinter, verifier: Verifier, each_block: BlockHook | None = None
) -> tuple[list[int | None], SketchRows]:
    """The fingerprints (``fingerprinter.fingerprint(t, empty=None)`` of each text) and the sketches
    (``verifier.sketch(t)``) of many texts, the sketches as one :class:`simdb.core.sketch.compare.SketchRows`
    (row ``i`` is text ``i``'s sketch; empty: no word characters). ``each_block``: sees the grams the
    sketches hash (band keys of the same pass, :class:`simdb.core.sketch.bands.BlockBandKeys`).

    Why CSR and not a list of lists: the loader writes the values straight into COPY's binary format
    (:mod:`simdb.store.encode`) without a Python int per value."""
    if verifier.scheme != SCHEME:
        raise InvalidArgumentError(f"a verified collection's sketches are of the scheme {SCHEME!r}, not {verifier.scheme!r}")
    sketches = SketchRows.from_csr(*grouped_sketches(texts, verifier.size, each_block))
    return fingerprinter.many(texts, empty=None), sketches


def sketch_texts(rows: SketchRows) -> list[str | None]:
    """Each row of ``rows`` as PostgreSQL's int4[] text (``{v1,v2,...}``; None for an empty row), for a
    statement's text parameter."""
    bounds = rows.offsets.tolist()
    strs = list(map(str, rows.values.tolist()))
    return ["{" + ",".join(strs[a:b]) + "}" if b > a else None for a, b in zip(bounds, bounds[1:])]
