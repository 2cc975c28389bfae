"""The module paths of simdb 0.1's flat layout, kept importable (with a DeprecationWarning).

Why: simdb's modules moved into packages that show the layers (``simdb.core`` for the pure
core, ``simdb.index`` for the facade, one package per integration: CHANGELOG.md lists every
move). Code written against 0.1.0's paths (``import simdb.bits``,
``from simdb.alembic_ops import ...``) keeps working: a finder on ``sys.meta_path``
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

# old path -> new path: only the modules simdb 0.1.0 shipped (``git ls-tree 8db3917 simdb/``). Paths that
# existed only between releases are not kept: no released code can import them.
MOVED: dict[str, str] = {
    "simdb.bits": "simdb.core.bits",
    "simdb.probes": "simdb.core.bits",
    "simdb.radius_pairs": "simdb.core.radius_pairs",
    "simdb.tokenize": "simdb.core.tokenize",
    "simdb.fingerprint": "simdb.core.fingerprint",
    "simdb.weighting": "simdb.core.fingerprint.weighting",
    "simdb.shingles": "simdb.core.sketch.shingles",
    "simdb.dedup": "simdb.index.duplicates",
    "simdb.alembic_ops": "simdb.alembic",
    "simdb.alembic_host": "simdb.alembic",
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
