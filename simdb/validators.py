"""Refuse near-duplicate input: the one implementation behind simdb's framework validators.

Why one framework-free module: the Django, Django REST framework, WTForms and FastAPI
validators (:mod:`simdb.django.validators`, :mod:`simdb.drf`, :mod:`simdb.wtforms`,
:mod:`simdb.fastapi`) must refuse the same texts with the same message, so the decision and
the words live here, and each adapter only translates :class:`NearDuplicateError` into its
framework's own error (``ValidationError``, ``HTTPException``).

Why the validators *store* and do not merely check: a check followed, later in the request,
by an insert lets two concurrent requests with the same text both pass the check and both be
stored. :func:`admit` is ``add_if_unique``: the check and the insert are one transaction
serialised on the text's fingerprint blocks (see :mod:`simdb.index.duplicates`), so of two near-identical
submissions exactly one is admitted. The web adapters (:mod:`simdb.wtforms`, :mod:`simdb.fastapi`)
call :func:`reserve` / :func:`reserve_async` instead: the same insert, held uncommitted until the
framework says the request succeeded (committed) or failed (rolled back), so that a request failing
after validation (a CSRF check, a later field or dependency, the view) stores nothing and its retry
is not refused as a copy of itself (:meth:`simdb.SimhashIndex.reserve` says how the guarantee holds).
:func:`admit` (committed at once) and :func:`release` stay for a caller with no request to wait for.

The message names the stored key the text nearly duplicates and its similarity: the verified
Jaccard similarity in a verified collection (the default), else ``1 - distance/64`` of the
fingerprints, so a user (or a moderator) can find the earlier text. For programs, :func:`measures`
gives the same numbers under the names every simdb answer uses (``jaccard``, ``distance``, and
``similarity`` only in :class:`simdb.Match`'s meaning, ``1 - distance/64``), never one name for two
measures.
"""

from __future__ import annotations

from typing import Any

from simdb.errors import InputError, InputTooLargeError
from simdb.results import AddResult, Match

__all__ = [
    "NUL_MESSAGE", "PENDING", "NearDuplicateError", "admit", "measures", "nul_paths", "refusal_message", "release", "reserve",
    "reserve_async", "text_problem", "too_large_message",
]

#: the attribute, on a Flask request's ``flask.g``, holding its reservations not yet finished,
#: ``[(form, reservation), ...]``: :mod:`simdb.wtforms` adds to it, :class:`simdb.flask.SimDB`'s teardown
#: rolls back what a failed request left in it
PENDING = "simdb_pending"

#: what every adapter says of a NUL character in a posted field (PostgreSQL's text and jsonb cannot hold it)
NUL_MESSAGE = "must not contain a NUL character (\\u0000)"


class NearDuplicateError(InputError):
    """The text nearly duplicates a stored one (a ``ValueError``, so Pydantic and form libraries
    that collect ``ValueError`` report it as a validation error of the field).

    ``key`` is the text's own key (not stored), ``match`` the nearest stored row
    (:class:`simdb.Match`: ``key``, ``distance``, ``similarity``, ``jaccard``, ``meta``).
    """

    def __init__(self, key: str, match: Match):
        self.key = key
        self.match = match
        super().__init__(refusal_message(match))


def measures(match: Match) -> dict:
    """The measures of a refusal for a program (an HTTP body, a form error's params), under the names
    of :class:`simdb.Match` and of every simdb answer (the CLI's JSON, docs/cli.md): ``jaccard``, the
    verified Jaccard similarity (None when the match was judged by Hamming distance: a Hamming
    collection, a row stored by fingerprint), and ``distance``, the Hamming distance of the
    fingerprints; in a Hamming answer also ``similarity``, the fingerprint similarity ``1 - distance/64``
    the message quotes. Why not one ``similarity`` for whichever decided: the same name would then
    mean two measures (0.92 Jaccard here, 0.97 fingerprint similarity in ``Match.similarity``)."""
    out: dict = {"jaccard": None if match.jaccard is None else round(float(match.jaccard), 4),
                 "distance": match.distance}
    if match.jaccard is None:
        out["similarity"] = round(float(match.similarity), 4)
    return out


def refusal_message(match: Match) -> str:
    """``near-duplicate of 'post-1' (Jaccard similarity 0.91)``: what every validator says."""
    if match.jaccard is None:
        return (
            f"near-duplicate of {match.key!r} (fingerprint similarity {match.similarity:.2f}, "
            f"{match.distance} of 64 bits differ)"
        )
    return f"near-duplicate of {match.key!r} (Jaccard similarity {match.jaccard:.2f})"


def nul_paths(value: Any, path: tuple = ()) -> list[tuple]:
    """``(path, string)`` of each string in ``value`` (JSON: dicts, lists) that holds a NUL character.

    Why the adapters look: stored meta is PostgreSQL jsonb, which cannot hold ``\\u0000``, so
    :func:`admit` refuses such meta with ``InvalidArgumentError``; when the NUL came from the user's
    input, the adapter must say so on the field (a 422, a form error), not let it become a 500."""
    if isinstance(value, str):
        return [(path, value)] if "\x00" in value else []
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in nul_paths(v, (*path, k))]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in nul_paths(v, (*path, i))]
    return []


def text_problem(text: Any) -> str | None:
    """What is wrong with a posted text before it is compared, in every framework's words (None: nothing).

    Why here: every framework must refuse the same texts with the same words, on the text's own field:
    an empty (or all-whitespace) text is ``"must not be empty"``, a NUL :data:`NUL_MESSAGE`."""
    if not isinstance(text, str):
        return None
    if not text.strip():
        return "must not be empty"
    if "\x00" in text:
        return NUL_MESSAGE
    return None


def too_large_message(exc: InputTooLargeError) -> str:
    """What a user is told about a text over the index's maximum text size (``InputTooLargeError`` from
    :func:`admit`): its size and the limit, without the hint for the app's developer
    (``max_text_bytes=``, ``$SIMDB_MAX_TEXT_BYTES``). Why the adapters catch it: the size of a posted
    text is the user's input, so it must be a field error (a 422, a form error), not a 500."""
    return "too long to compare: " + str(exc).split(" (raise it with", 1)[0]


def _refuse_or_return(key: str, result: AddResult) -> AddResult:
    if not result.inserted and result.matches:
        raise NearDuplicateError(key, result.matches[0])
    return result


def admit(index: Any, key: str, text: str, *, k: int = 3, meta: Any = None) -> AddResult:
    """Store ``text`` under ``key`` in ``index`` (a :class:`simdb.SimhashIndex`) unless a stored text
    nearly duplicates it; then raise :class:`NearDuplicateError` naming the nearest one.

    Atomic: ``index.add_if_unique``. ``k`` is the Hamming radius of a Hamming collection (a verified
    collection decides by Jaccard, see :meth:`simdb.SimhashIndex.add_if_unique`).
    """
    return _refuse_or_return(key, index.add_if_unique(key, text, k=k, meta=meta))


def reserve(index: Any, key: str, text: str, *, k: int = 3, meta: Any = None) -> Any:
    """:func:`admit`, left uncommitted: ``index.reserve`` (:class:`simdb.index.reservation.Reservation`),
    whose ``commit()`` the adapter calls once the request has succeeded and ``rollback()`` otherwise, so a
    failed request stores nothing. Raises :class:`NearDuplicateError` (nothing held) for a near-duplicate."""
    reservation = index.reserve(key, text, k=k, meta=meta)
    _refuse_or_return(key, reservation.result)
    return reservation


async def reserve_async(index: Any, key: str, text: str, *, k: int = 3, meta: Any = None) -> Any:
    """:func:`reserve` on a :class:`simdb.aio.AsyncSimhashIndex` (an ``AsyncReservation``)."""
    reservation = await index.reserve(key, text, k=k, meta=meta)
    _refuse_or_return(key, reservation.result)
    return reservation


def release(index: Any, key: str) -> bool:
    """Give back an admitted text (the request failed after :func:`admit`), so it refuses nothing later."""
    return bool(index.remove(key))
