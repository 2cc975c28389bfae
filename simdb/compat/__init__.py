"""Compatibility with the PyPI ``simhash`` package (2.x, by 1e0n).

- :mod:`simdb.compat.simhash`: the drop-in classes, ``from simdb.compat.simhash import
  Simhash, SimhashIndex`` in place of ``from simhash import Simhash, SimhashIndex``, with an
  index that lives in PostgreSQL (docs/compat-simhash.md).
- the package's fingerprint values (``pypi_simhash`` and friends), re-exported from the pure
  module :mod:`simdb.core.fingerprint.pypi_values` where they live (``Fingerprinter.preset("simhash-pypi")``).
"""

from simdb.core.fingerprint.pypi_values import (
    PYPI_REGEX,
    pypi_hash,
    pypi_simhash,
    pypi_simhash_features,
    pypi_simhash_items,
    pypi_tokenize,
)

__all__ = ["PYPI_REGEX", "pypi_hash", "pypi_simhash", "pypi_simhash_features", "pypi_simhash_items", "pypi_tokenize"]
