"""Convert a collection to a verified collection (``simdb convert``, ``SimhashIndex.convert_to_verified``).

The code is the store's (:mod:`simdb.store.convert`: it rewrites every row in one transaction);
this name stays for its importers.
"""

from __future__ import annotations

from simdb.store.convert import convert_to_verified, is_current

__all__ = ["convert_to_verified", "is_current"]
