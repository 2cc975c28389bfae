"""Adapters from the library's answers (matches, clusters, pairs) to plain dicts for printing.

The same dicts feed the tables, the CSV and the JSON output, so the three never
disagree; the command-line arguments that shape a search (-k, --min-jaccard) are
read here too.
"""

from __future__ import annotations

import re
from typing import Any

from simdb.cli.status import DEFAULT_K

__all__ = [
    "k_of", "criterion", "scans", "measures", "shingle_words", "match_dict", "cluster_dict", "pair_dict", "rule_dict",
    "most_similar_first",
]


def k_of(args) -> int:
    """-k, or the default distance."""
    return DEFAULT_K if args.k is None else args.k


def shingle_words(scheme: str) -> str:
    """A shingle scheme's grams in words (``chr4-fmix64-v4``: "character 4-grams"), read from its name,
    so that a message states the rule of the scheme it names."""
    m = re.match(r"chr(\d+)-", scheme)
    return f"shingles of scheme {scheme}" if m is None else f"character {m[1]}-grams"


def measures(jaccard: Any, distance: Any) -> str:
    """An answer's two measures as every line names them: ``jaccard 0.992, distance 3`` (a Hamming
    answer, with no Jaccard: ``distance 3``)."""
    how = f"jaccard {float(jaccard):.3f}, " if jaccard is not None else ""
    return f"{how}distance {distance}"


def scans(args, index: Any) -> bool:
    """Does this text query compare every row? In a verified collection, at a threshold
    (``--min-jaccard``, else the collection's) below the band keys' reach (``index.rule.scans``;
    simdb.store.candidates), unless ``--hamming`` asks for the Hamming answer."""
    verifier = getattr(index, "verifier", None)
    if verifier is None or getattr(args, "hamming", False):
        return False
    mj = getattr(args, "min_jaccard", None)
    return bool(index.rule.scans(verifier.min_jaccard if mj is None else mj))


def criterion(args, index: Any = None) -> str:
    """How near-duplicates are defined for this command, for messages: the verified rule of a
    verified collection (``index.verifier``), else the Jaccard threshold or the Hamming k asked for."""
    mj = getattr(args, "min_jaccard", None)
    verifier = getattr(index, "verifier", None)
    if verifier is not None and not getattr(args, "hamming", False):
        t = verifier.min_jaccard if mj is None else mj
        if scans(args, index):  # below the keys' reach a query compares every row (simdb.store.candidates)
            return f"Jaccard >= {t:g}, every row compared"
        return f"Jaccard >= {t:g}, band-key candidates"  # candidates share band keys, whatever their distance
    if mj is not None:
        return f"Jaccard >= {mj:g}" + (f", candidates within k={args.k}" if args.k is not None else "")
    return f"k={k_of(args)}"


def rule_dict(args, index: Any) -> dict:
    """The rule an answer was given by, for JSON: a verified collection's settings as it stores them
    (``config["verify"]``, and ``"bands"``: its band scheme, if any), with ``--min-jaccard`` and ``-k``
    where they change them; under ``--hamming`` or in a Hamming-only collection the Hamming distance
    ``{"scheme": "hamming", "k": k}``. Why the stored form: a reader can tell two collections' rules
    apart (token 3-grams or character 4-grams, sketch size, radius) by the same names everywhere."""
    verifier = getattr(index, "verifier", None)
    if verifier is None or getattr(args, "hamming", False):
        return {"scheme": "hamming", "k": k_of(args)}
    rule = dict(verifier.to_dict())
    mj = getattr(args, "min_jaccard", None)
    if mj is not None:
        rule["min_jaccard"] = mj
    rule["k"] = max(verifier.k, k_of(args))
    config = getattr(index, "config", None)
    if isinstance(config, dict) and config.get("bands") is not None:
        rule["bands"] = config["bands"]
    return rule


def most_similar_first(item: dict) -> tuple:
    """Sort key of answers (match or pair dicts): Jaccard highest first (answers without one last),
    then distance, then the keys, so that every output lists the same answer in the same order."""
    j = item.get("jaccard")
    return (j is None, -(j or 0.0), item.get("distance", 0), str(item.get("key", item.get("key_a"))),
            str(item.get("key_b", "")))


def match_dict(m) -> dict:
    """A match under the two names every output uses: ``jaccard`` (the rule's similarity; None in a
    Hamming answer) and ``distance`` (Hamming), not the 1 - d/64 "similarity" of a fingerprint."""
    j = getattr(m, "jaccard", None)
    d = {"key": m.key, "jaccard": None if j is None else round(float(j), 4), "distance": m.distance, "fp": m.fp}
    if getattr(m, "meta", None) is not None:
        d["meta"] = m.meta
    return d


def cluster_dict(n: int, cluster) -> dict:
    """A :class:`~simdb.results.Cluster` numbered ``n``, as every output lists it."""
    return {"cluster": n, "representative": cluster.representative, "size": len(cluster.keys),
            "keys": list(cluster.keys)}


def pair_dict(pair) -> dict:
    """A :class:`~simdb.results.Pair` or :class:`~simdb.results.VerifiedPair` as key_a, key_b, ``jaccard``
    (None in a Hamming answer) and ``distance``."""
    j = getattr(pair, "jaccard", None)
    return {"key_a": pair.key_a, "key_b": pair.key_b, "jaccard": None if j is None else round(float(j), 4),
            "distance": pair.distance}
