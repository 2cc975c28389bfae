"""simdb: near-duplicate text detection with SimHash, inside PostgreSQL.

The pipeline's stages are modules: ``tokenize`` (text -> features),
``fingerprint`` (features -> 64-bit SimHash), ``bits`` (Hamming distance,
blocks, signed/unsigned forms), ``store`` (tables, SQL, migrations) and
``index`` (the ``SimhashIndex`` API). Names are loaded lazily so that
``import simdb`` stays cheap (no jieba, no SQLAlchemy until used); the
``__init__.pyi`` stub next to this file declares the same names with their
types for type checkers (the package ships ``py.typed``), and
tests/test_house.py checks the two agree.
"""

from __future__ import annotations

import importlib

from simdb import moved_modules

__version__ = "0.1.0"  # the one place the version is written: the build reads it (pyproject.toml); see CHANGELOG.md

# public name -> module that defines it
_EXPORTS = {
    "BITS": "simdb.core.bits",
    "MASK64": "simdb.core.bits",
    "blocks": "simdb.core.bits",
    "cosine_estimate": "simdb.core.bits",
    "hamming": "simdb.core.bits",
    "similarity": "simdb.core.bits",
    "to_signed": "simdb.core.bits",
    "to_unsigned": "simdb.core.bits",
    "simhash": "simdb.core.fingerprint.simhash_function",
    "simhash_features": "simdb.core.fingerprint",
    "Fingerprinter": "simdb.core.fingerprint",
    "IdfTable": "simdb.core.fingerprint.weighting",
    "pypi_simhash": "simdb.core.fingerprint.pypi_values",
    "SimhashIndex": "simdb.index",
    "AsyncSimhashIndex": "simdb.aio",
    # results
    "Match": "simdb.results",
    "Entry": "simdb.results",
    "AddResult": "simdb.results",
    "Pair": "simdb.results",
    "VerifiedPair": "simdb.results",
    "Cluster": "simdb.results",
    # errors: every simdb error can be caught as simdb.SimdbError, or by its builtin base
    "SimdbError": "simdb.errors",
    "InputError": "simdb.errors",
    "InvalidArgumentError": "simdb.errors",
    "InvalidTypeError": "simdb.errors",
    "InputTooLargeError": "simdb.errors",
    "CollectionConfigError": "simdb.errors",
    "DatabaseError": "simdb.errors",
    "SchemaManagedElsewhereError": "simdb.errors",
    "UnsafeHomeError": "simdb.errors",
    "IndexClosedError": "simdb.errors",
    "KeyNotFoundError": "simdb.errors",
    "CollectionChangedError": "simdb.errors",
    "migrate": "simdb.store.migrate",
    "write_report": "simdb.report",
    "dedup_records": "simdb.dataset.dedup",
    "render_report": "simdb.report",
}

__all__ = sorted(_EXPORTS)

# simdb 0.1.0's flat module paths (simdb.bits, simdb.alembic_ops, ...) keep importing
moved_modules.install()

# names of the legacy MinHash-band store (``jaccard=True``, issue 8), retired by issue 28: an import
# of one says what replaced it rather than a bare "no attribute"
_RETIRED = {
    "MinHasher": "simdb.minhash",
    "JaccardPair": "simdb.jaccard",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if name in _RETIRED:
        raise ImportError(
            f"simdb.{name} ({_RETIRED[name]}) was removed with the legacy MinHash-band store (jaccard=True): "
            "collections are verified by default (near(..., min_jaccard=...)); see CHANGELOG.md and "
            "docs/near-duplicates.md (simdb convert)",
            name=name,
        )
    if module is None:
        raise AttributeError(f"module 'simdb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + __all__)
