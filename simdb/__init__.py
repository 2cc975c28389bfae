"""simdb: near-duplicate text detection with SimHash, inside PostgreSQL.

The pipeline's stages are modules: ``core.tokenize`` (text -> features),
``core.fingerprint`` (features -> 64-bit SimHash), ``core.bits`` (Hamming distance,
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

# public name -> module that defines it: what an application imports every day (``__all__``, and what
# ``from simdb import *`` gives). The errors here are the base and its direct kinds, each also a builtin
# (``InputError`` a ValueError, ``DatabaseError`` a RuntimeError, ...), so one ``except`` covers a family;
# every error, the finer ones included, is in ``simdb.errors.__all__``.
_EXPORTS = {
    "SimhashIndex": "simdb.index",
    "AsyncSimhashIndex": "simdb.aio",
    "Fingerprinter": "simdb.core.fingerprint",
    "simhash": "simdb.core.fingerprint",
    "hamming": "simdb.core.bits",
    "similarity": "simdb.core.bits",
    "migrate": "simdb.store.migrate",
    "dedup_records": "simdb.dataset.dedup",
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
    "InvalidTypeError": "simdb.errors",
    "KeyNotFoundError": "simdb.errors",
    "IndexClosedError": "simdb.errors",
    "CollectionChangedError": "simdb.errors",
    "DatabaseError": "simdb.errors",
}

__all__ = sorted(_EXPORTS)

# names that still resolve as ``simdb.X`` (and ``from simdb import X``) but are not in ``__all__``: their
# home is the module named here. Why kept: simdb 0.1.0 exported the helpers (``from simdb import to_signed``
# in released code keeps working), and the finer errors were importable from ``simdb`` until now; one
# dict entry each costs nothing at import (resolved lazily, like the exports).
_ALSO_IMPORTABLE = {
    "BITS": "simdb.core.bits",
    "MASK64": "simdb.core.bits",
    "blocks": "simdb.core.bits",
    "cosine_estimate": "simdb.core.bits",
    "to_signed": "simdb.core.bits",
    "to_unsigned": "simdb.core.bits",
    "simhash_features": "simdb.core.fingerprint",
    "IdfTable": "simdb.core.fingerprint.weighting",
    "pypi_simhash": "simdb.core.fingerprint.pypi_values",
    "write_report": "simdb.report",
    "render_report": "simdb.report",
    "InvalidArgumentError": "simdb.errors",
    "InputTooLargeError": "simdb.errors",
    "CollectionConfigError": "simdb.errors",
    "SchemaManagedElsewhereError": "simdb.errors",
    "UnsafeHomeError": "simdb.errors",
}

# simdb 0.1.0's flat module paths (simdb.bits, simdb.alembic_ops, ...) keep importing
moved_modules.install()

# names of the retired MinHash-band store (``jaccard=True``): an import of one says what replaced it
# rather than a bare "no attribute"
_RETIRED = {
    "MinHasher": "simdb.minhash",
    "JaccardPair": "simdb.jaccard",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name) or _ALSO_IMPORTABLE.get(name)
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
