"""Types of the names ``simdb`` resolves lazily (see ``simdb/__init__.py``): for type checkers only.

Every name of ``_EXPORTS`` and of ``_ALSO_IMPORTABLE`` is declared (``X as X`` re-exports it), so
``from simdb import to_signed`` type-checks as it runs; ``__all__`` lists only ``_EXPORTS``, as at run time.
"""

from simdb.aio import AsyncSimhashIndex as AsyncSimhashIndex
from simdb.core.bits import BITS as BITS
from simdb.core.bits import MASK64 as MASK64
from simdb.core.bits import blocks as blocks
from simdb.core.bits import cosine_estimate as cosine_estimate
from simdb.core.bits import hamming as hamming
from simdb.core.bits import similarity as similarity
from simdb.core.bits import to_signed as to_signed
from simdb.core.bits import to_unsigned as to_unsigned
from simdb.core.fingerprint import Fingerprinter as Fingerprinter
from simdb.core.fingerprint import simhash as simhash
from simdb.core.fingerprint import simhash_features as simhash_features
from simdb.core.fingerprint.pypi_values import pypi_simhash as pypi_simhash
from simdb.core.fingerprint.weighting import IdfTable as IdfTable
from simdb.dataset.dedup import dedup_records as dedup_records
from simdb.errors import CollectionChangedError as CollectionChangedError
from simdb.errors import CollectionConfigError as CollectionConfigError
from simdb.errors import DatabaseError as DatabaseError
from simdb.errors import IndexClosedError as IndexClosedError
from simdb.errors import InputError as InputError
from simdb.errors import InputTooLargeError as InputTooLargeError
from simdb.errors import InvalidArgumentError as InvalidArgumentError
from simdb.errors import InvalidTypeError as InvalidTypeError
from simdb.errors import KeyNotFoundError as KeyNotFoundError
from simdb.errors import SchemaManagedElsewhereError as SchemaManagedElsewhereError
from simdb.errors import SimdbError as SimdbError
from simdb.errors import UnsafeHomeError as UnsafeHomeError
from simdb.index import SimhashIndex as SimhashIndex
from simdb.report import render_report as render_report
from simdb.report import write_report as write_report
from simdb.results import AddResult as AddResult
from simdb.results import Cluster as Cluster
from simdb.results import Entry as Entry
from simdb.results import Match as Match
from simdb.results import Pair as Pair
from simdb.results import VerifiedPair as VerifiedPair
from simdb.store.migrate import migrate as migrate

__version__: str
__all__ = [
    "AddResult",
    "AsyncSimhashIndex",
    "Cluster",
    "CollectionChangedError",
    "DatabaseError",
    "Entry",
    "Fingerprinter",
    "IndexClosedError",
    "InputError",
    "InvalidTypeError",
    "KeyNotFoundError",
    "Match",
    "Pair",
    "SimdbError",
    "SimhashIndex",
    "VerifiedPair",
    "dedup_records",
    "hamming",
    "migrate",
    "simhash",
    "similarity",
]
