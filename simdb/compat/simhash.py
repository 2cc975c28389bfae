"""Drop-in for the PyPI ``simhash`` package (2.1.2): change one import line, keep the code.

::

    # from simhash import Simhash, SimhashIndex
    from simdb.compat.simhash import Simhash, SimhashIndex

:class:`Simhash` gives the package's values (``simdb.core.fingerprint.pypi_values``: the same md5 features
and bit rule, vectorised), constructors, attributes and methods. :class:`SimhashIndex` keeps
the package's methods, but its entries live in a simdb collection in PostgreSQL (embedded by
default; ``database=`` / ``collection=`` for your own server), so they survive a restart,
and ``get_near_dups`` is answered exactly by the store's block indexes for k up to 11.

Why an entry is stored under the key ``"%x,%s" % (value, obj_id)``: that is the string the
package keeps in its buckets, so the package's behaviour follows from the store's: the same
``obj_id`` may be added under several fingerprints, adding the same pair twice keeps one
entry, and ``delete(obj_id, simhash)`` removes exactly that pair.

What cannot be kept, and says so: ``f`` other than 64 (simdb stores 64-bit fingerprints) and
``k`` above 11 raise :class:`~simdb.errors.InvalidArgumentError`. Differences that do not
change an answer are listed in docs/compat-simhash.md.
"""

from __future__ import annotations

import hashlib
import logging
import numbers
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from simdb.core.bits import MASK64, MAX_K
from simdb.core.fingerprint import Fingerprinter
from simdb.core.fingerprint.pypi_values import (
    PYPI_REGEX,
    pypi_simhash,
    pypi_simhash_features,
    pypi_simhash_items,
    pypi_tokenize,
)
from simdb.errors import InvalidArgumentError, InvalidTypeError
from simdb.index import SimhashIndex as _StoreIndex
from simdb.store import rows as _rows

__all__ = ["Simhash", "SimhashIndex", "DEFAULT_COLLECTION"]

#: the collection a SimhashIndex uses unless given ``collection=``
DEFAULT_COLLECTION = "simhash"
_DEFAULT_REG = PYPI_REGEX.pattern


def _hashfunc(x: bytes) -> bytes:
    """The package's default hash function (md5 digest)."""
    return hashlib.md5(x).digest()


def _check_f(f: Any) -> int:
    if isinstance(f, bool) or not isinstance(f, numbers.Integral):
        raise InvalidTypeError(f"f must be an int, got {type(f).__name__}")
    if f != 64:
        raise InvalidArgumentError(
            f"f={f} is not supported: simdb.compat.simhash stores 64-bit fingerprints (f=64, the package's "
            "default); use the PyPI simhash package itself for other widths"
        )
    return 64


class Simhash:
    """``simhash.Simhash``: ``Simhash(text | features | int | Simhash, f=64, reg=..., hashfunc=None, log=None)``.

    ``value`` is the fingerprint (an int), ``distance(other)`` the Hamming distance, ``==``
    compares values. Instances are unhashable, as the package's are (``__eq__`` without
    ``__hash__``).
    """

    large_weight_cutoff = 50
    batch_size = 200

    def __init__(self, value: Any, f: int = 64, reg: Any = _DEFAULT_REG, hashfunc: Any = None, log: Any = None):
        self.f = _check_f(f)
        self.f_bytes = f // 8
        self.reg = reg
        self.value: Any = None
        self.hashfunc = _hashfunc if hashfunc is None else hashfunc
        self.hashfunc_returns_int = isinstance(self.hashfunc(b"test"), numbers.Integral)
        self.log = logging.getLogger("simhash") if log is None else log
        if isinstance(value, (bytes, bytearray)):  # an Iterable of ints: not features (decode it first)
            raise InvalidTypeError(
                f"value must be a str, features, an int or a Simhash, got {type(value).__name__} (decode it to str)"
            )
        if isinstance(value, Simhash):
            self.value = value.value
        elif isinstance(value, str):
            self.build_by_text(value)
        elif isinstance(value, Iterable):
            self.build_by_features(value)
        elif isinstance(value, numbers.Integral):
            self.value = value
        else:
            raise InvalidTypeError(
                f"Bad parameter with type {type(value)}: value must be a str, features, an int or a Simhash"
            )

    # -- the package's building blocks
    def _default_path(self) -> bool:
        return self.hashfunc is _hashfunc

    def _tokenize(self, content: str) -> list[str]:
        return pypi_tokenize(content, self.reg)

    def _digest(self, data: bytes) -> bytes:
        h: Any = self.hashfunc(data)  # an int or bytes, whichever the user's hashfunc returns
        if self.hashfunc_returns_int:
            return (h & MASK64).to_bytes(8, "big")
        return h[-self.f_bytes :]

    def build_by_text(self, content: str) -> None:
        if self._default_path() and self.reg in (_DEFAULT_REG, PYPI_REGEX):
            self.value = pypi_simhash(content)
            return
        features: dict[str, int] = {}
        for feature in sorted(self._tokenize(content)):
            features[feature] = features.get(feature, 0) + 1
        self.build_by_features(features)

    def build_by_features(self, features: Any) -> None:
        """``features``: str tokens (weight 1), ``(token, weight)`` pairs, or a token -> weight dict."""
        if self._default_path():
            self.value = pypi_simhash_features(features)
        else:
            self.value = pypi_simhash_items(features, self._digest)

    def distance(self, another: Any) -> int:
        """The Hamming distance to ``another`` Simhash (of this module or the package's, f=64)."""
        return ((self.value ^ _value_of(another, "distance: another")) & MASK64).bit_count()

    def __eq__(self, other: object) -> bool:
        if not hasattr(other, "value"):
            return NotImplemented
        return self.value == other.value

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Simhash({self.value!r})"


def _value_of(simhash: Any, where: str) -> int:
    """The fingerprint of a Simhash (this module's or the PyPI package's), checked for f=64."""
    value = getattr(simhash, "value", None)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidTypeError(f"{where} must be a Simhash (with an int .value), got {type(simhash).__name__}")
    f = getattr(simhash, "f", 64)
    if f != 64:
        raise InvalidArgumentError(f"{where} has f={f}; simdb.compat.simhash holds 64-bit fingerprints (f=64)")
    return int(value)


def _entry_key(value: int, obj_id: Any) -> str:
    return f"{value:x},{obj_id}"


class SimhashIndex:
    """``simhash.SimhashIndex`` whose entries live in a simdb collection (PostgreSQL).

    ``SimhashIndex(objs, f=64, k=2, log=None, *, database=None, collection="simhash")``:
    ``objs`` is an iterable of ``(obj_id, simhash)``, added in one all-or-nothing batch (entries
    already in the collection stay: a restart finds them). ``database``: a URL or SQLAlchemy
    Engine (None: ``SIMDB_DATABASE_URL``, then the embedded server). ``k`` is the tolerance of
    :meth:`get_near_dups`, 0..11. ``close()`` (or ``with``) releases the connections.
    """

    def __init__(
        self, objs: Iterable[Any] = (), f: int = 64, k: int = 2, log: Any = None, *,
        database: Any = None, collection: str = DEFAULT_COLLECTION,
    ):
        self.f = _check_f(f)
        if isinstance(k, bool) or not isinstance(k, numbers.Integral):
            raise InvalidTypeError(f"k must be an int, got {type(k).__name__}")
        if not 0 <= k <= MAX_K:
            raise InvalidArgumentError(
                f"k={k} is out of range: simdb answers Hamming distances 0..{MAX_K} exactly (the package's default is 2)"
            )
        self.k: int = int(k)
        self.log = logging.getLogger("simhash") if log is None else log
        self.index: _StoreIndex = _StoreIndex(database, collection, Fingerprinter.preset("simhash-pypi"))
        try:
            items = []
            for i, q in enumerate(objs):
                try:
                    obj_id, simhash = q
                except (TypeError, ValueError):
                    raise InvalidArgumentError(f"objs[{i}] must be an (obj_id, simhash) pair") from None
                value = _value_of(simhash, f"objs[{i}] simhash")
                items.append({"key": _entry_key(value, obj_id), "fp": value & MASK64})
            self.log.info("Initializing %s data.", len(items))
            if items:
                self.index.add_many(items)
        except BaseException:
            self.index.close()
            raise

    def get_near_dups(self, simhash: Any) -> list[str]:
        """The obj_ids (str) of the entries within ``k`` of ``simhash``, each once, in no set order."""
        value = _value_of(simhash, "simhash")
        matches = self.index.near(value & MASK64, k=self.k)
        return list({m.key.split(",", 1)[1] for m in matches})

    def add(self, obj_id: Any, simhash: Any) -> None:
        value = _value_of(simhash, "simhash")
        self.index.add(_entry_key(value, obj_id), fp=value & MASK64)

    def delete(self, obj_id: Any, simhash: Any) -> None:
        value = _value_of(simhash, "simhash")
        self.index.remove(_entry_key(value, obj_id))

    @property
    def offsets(self) -> list[int]:
        """The package's bucket offsets for ``k`` (used by :meth:`get_keys` and :meth:`bucket_size`)."""
        return [self.f // (self.k + 1) * i for i in range(self.k + 1)]

    def _chunks(self) -> list[tuple[int, int]]:
        """(offset, width) of each bucket chunk: from each offset to the next (the last to ``f``)."""
        offsets = self.offsets
        return [(offset, end - offset) for offset, end in zip(offsets, [*offsets[1:], self.f])]

    def get_keys(self, simhash: Any) -> Iterator[str]:
        """The package's bucket keys of ``simhash`` (``'%x:%x' % (chunk, i)``), an iterator as the package's.

        Checked now, not at the first key: a closed index refuses (IndexClosedError) as every method does,
        and a wrong ``simhash`` is named at the call."""
        self.index._check_open()
        value = _value_of(simhash, "simhash")
        return iter([f"{value >> offset & ((1 << width) - 1):x}:{i:x}" for i, (offset, width) in enumerate(self._chunks())])

    def bucket_size(self) -> int:
        """How many of the package's buckets the stored entries fill (distinct ``get_keys`` over them).

        The package also counts buckets that a lookup or a delete left empty; simdb keeps no
        buckets, so it counts only the ones its entries fill (the same number after adds only).
        """
        fps = [fp for (fp,) in self.index.connection().execute(_rows.FPS_SQL, {"c": self.index.collection_id})]
        if not fps:
            return 0
        u = np.array(fps, dtype=np.int64).view(np.uint64)
        return sum(len(np.unique((u >> np.uint64(offset)) & np.uint64((1 << width) - 1))) for offset, width in self._chunks())

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> SimhashIndex:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
