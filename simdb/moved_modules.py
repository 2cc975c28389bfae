"""The module paths of simdb 0.1's flat layout, kept importable (with a DeprecationWarning).

Why: simdb's modules moved into packages that show the layers (``simdb.core`` for the pure
core, ``simdb.index`` for the facade, one package per integration: CHANGELOG.md lists every
move). Code written against the old paths (``import simdb.sketch``,
``from simdb.sqlalchemy_verified import ...``) keeps working: a finder on ``sys.meta_path``
answers an old name with the module at its new path (one module object, so patches and
``isinstance`` agree) and warns once with the new name to use. Nothing inside simdb imports
an old path (tests/test_house.py checks).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

__all__ = ["MOVED", "install"]

# old path -> new path
MOVED: dict[str, str] = {
    "simdb.bits": "simdb.core.bits",
    "simdb.validate": "simdb.core.validate",
    "simdb.probes": "simdb.core.probes",
    "simdb.block_pairs": "simdb.core.block_pairs",
    "simdb.radius_pairs": "simdb.core.radius_pairs",
    "simdb.tokenize": "simdb.core.tokenize",
    "simdb.segment": "simdb.core.segment",
    "simdb.parallel": "simdb.core.parallel",
    "simdb.helper_exit": "simdb.core.helper_exit",
    "simdb.confined_files": "simdb.core.confined_files",
    "simdb.atomic_file": "simdb.core.atomic_file",
    "simdb.model_verifier": "simdb.core.model_verifier",
    "simdb.kept_texts": "simdb.core.kept_texts",
    "simdb.fingerprint": "simdb.core.fingerprint",
    "simdb.fingerprint_batch": "simdb.core.fingerprint.batch",
    "simdb.fingerprint_checks": "simdb.core.fingerprint.checks",
    "simdb.fingerprint_pool": "simdb.core.fingerprint.pool",
    "simdb.bitsum": "simdb.core.fingerprint.bitsum",
    "simdb.bitsum_lanes": "simdb.core.fingerprint.bitsum_lanes",
    "simdb.weighting": "simdb.core.fingerprint.weighting",
    "simdb.token_cache": "simdb.core.fingerprint.token_cache",
    "simdb.ascii_words": "simdb.core.fingerprint.ascii_words",
    "simdb.long_texts": "simdb.core.fingerprint.long_texts",
    "simdb.simhash_function": "simdb.core.fingerprint.simhash_function",
    "simdb.pypi_values": "simdb.core.fingerprint.pypi_values",
    "simdb.sketch": "simdb.core.sketch",
    "simdb.sketch_chars": "simdb.core.sketch.chars",
    "simdb.sketch_compare": "simdb.core.sketch.compare",
    "simdb.shingles": "simdb.core.sketch.shingles",
    "simdb.bands": "simdb.core.sketch.bands",
    "simdb.bands_oph": "simdb.core.sketch.bands_oph",
    "simdb.verified_features": "simdb.core.sketch.features",
    "simdb.dedup_dataset": "simdb.dataset.dedup",
    "simdb.dedup_order": "simdb.dataset.order",
    "simdb.dedup_undo": "simdb.dataset.undo",
    "simdb.dedup_defaults": "simdb.dataset.defaults",
    "simdb.records": "simdb.dataset.records",
    "simdb.record_readers": "simdb.dataset.readers",
    "simdb.index_search": "simdb.index.search_methods",
    "simdb.index_dedup": "simdb.index.dedup_methods",
    "simdb.index_keys": "simdb.index.key_methods",
    "simdb.index_texts": "simdb.index.text_methods",
    "simdb.search_modes": "simdb.index.rules",
    "simdb.dedup": "simdb.index.dedup",
    "simdb.convert": "simdb.store.convert",
    "simdb.index.convert": "simdb.store.convert",
    "simdb.embedded_guard": "simdb.embedded.guard",
    "simdb.embedded_home": "simdb.embedded.home",
    "simdb.embedded_life": "simdb.embedded.life",
    "simdb.sqlalchemy_verified": "simdb.sqlalchemy.verified",
    "simdb.sqlalchemy_aio": "simdb.sqlalchemy.aio",
    "simdb.alembic_ops": "simdb.alembic.ops",
    "simdb.alembic_host": "simdb.alembic.host",
    "simdb.alembic_verified": "simdb.alembic.verified",
}


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(
            f"{spec.name} moved to {self.new}; import it from there (the old path will be removed)",
            DeprecationWarning,
            stacklevel=2,
        )
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: :meth:`create_module` returned the module at its new path."""


class _OldPathFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(new))


def install() -> None:
    """Put the old-path finder first on ``sys.meta_path`` (once): before an editable install's finder, which would load a stale copy."""
    if not any(isinstance(f, _OldPathFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _OldPathFinder())
