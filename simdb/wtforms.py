"""A WTForms validator (Flask-WTF forms) that refuses near-duplicate texts, atomically, and stores
nothing for a request that fails.

``NotNearDuplicate(lambda: simdb_ext.index)`` in a field's ``validators=[...]`` *reserves* the text in
the simdb collection (:func:`simdb.validators.reserve`: ``add_if_unique`` left uncommitted) and refuses
a near-duplicate with ``"near-duplicate of 'KEY' (Jaccard similarity 0.93)"`` on the field.

Why it reserves rather than checks, and commits only once the request has succeeded:
:mod:`simdb.validators`. Here validation is not the end of the request: Flask-WTF checks the CSRF
token after the form's own fields, a later field can fail, the view can refuse or raise. So in a
Flask request the reservation is committed after the response is made, only if the response is a
success (status below 400) and the form has no error on any field; otherwise it is rolled back (and
on an exception, by :class:`simdb.flask.SimDB`'s teardown, or when collected). Outside a Flask request, the app finishes
it: :func:`commit_admitted` (``form``) commits when the form has no error and rolls back otherwise.

The key it reserved the text under is ``field.simdb_key`` (the view keeps it, e.g. as the post's id;
``field.simdb_reservation`` is the reservation). An edit names its own key (``key=lambda form:
request.view_args["post_id"]``): the row stored under the key is the text's earlier version, replaced,
never its near-duplicate. An empty text or a NUL character is refused on the field it is in, as in
every framework (:func:`simdb.validators.text_problem`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from flask import after_this_request, g, has_request_context
from wtforms.validators import StopValidation, ValidationError

from simdb.core.validate import check_k
from simdb.errors import InputTooLargeError
from simdb.validators import (
    NUL_MESSAGE,
    PENDING,
    NearDuplicateError,
    nul_paths,
    reserve,
    text_problem,
    too_large_message,
)

__all__ = ["NotNearDuplicate", "commit_admitted"]


def _form_is_valid(form: Any) -> bool:
    return not any(field.errors for field in form) and not getattr(form, "form_errors", None)


def commit_admitted(form: Any) -> list[str]:
    """Finish the reservations of ``form``'s :class:`NotNearDuplicate` validators: committed when no
    field of the form has an error, else rolled back. Returns the keys committed. In a Flask request
    this is done after the response (a success only); call it yourself outside one."""
    ok = _form_is_valid(form)
    done = []
    for field in form:
        reservation = getattr(field, "simdb_reservation", None)
        if reservation is not None and reservation.held:
            if ok:
                reservation.commit()
                done.append(reservation.key)
            else:
                reservation.rollback()
    return done


def _finish_pending(response: Any) -> Any:
    """After this request's response is made: commit the reservations of a success (status below 400)
    whose form has no error, roll back the others."""
    pending = g.pop(PENDING, [])
    success = response.status_code < 400
    try:
        for form, reservation in pending:
            if success and _form_is_valid(form):
                reservation.commit()
            else:
                reservation.rollback()
    finally:
        for _form, reservation in pending:  # a commit that failed: the others are not left held
            if reservation.held:
                reservation.rollback()
    return response


def _hold_until_response(form: Any, reservation: Any) -> None:
    """In a Flask request, the reservation is finished after the response (see the module docstring)."""
    if not has_request_context():
        return
    pending = g.get(PENDING)
    if pending is None:
        pending = []
        setattr(g, PENDING, pending)
        after_this_request(_finish_pending)
    pending.append((form, reservation))


def _refuse_nul_elsewhere(form: Any, field: Any, meta: Any) -> None:
    """A NUL in another field that goes into the stored meta (jsonb cannot hold it): the error goes on
    that field, where the user typed it; this field stops with a note that nothing was stored."""
    if not nul_paths(meta):
        return
    named = [f for f in form if f is not field and isinstance(f.data, str) and "\x00" in f.data]
    for other in named:
        other.errors = [*other.errors, NUL_MESSAGE]
    if named:
        raise StopValidation(f"not stored: {', '.join(f.name for f in named)} is invalid")


class NotNearDuplicate:
    """WTForms validator: admit the field's text into ``index`` or refuse it as a near-duplicate.

    ``index``: a :class:`simdb.SimhashIndex`, or a callable returning one at validation time
    (``lambda: simdb_ext.index`` with :class:`simdb.flask.SimDB`, which needs the app context).
    ``key(form)``: the key to store under (default a random hex id); ``meta(form)``: the JSON
    meta to store with it (default None); ``k``: the Hamming radius of a Hamming collection.
    """

    def __init__(
        self, index: Any, *, k: int = 3, key: Callable[[Any], str] | None = None,
        meta: Callable[[Any], Any] | None = None, message: str | None = None,
    ):
        self.index = index
        self.k = check_k(k)  # when the form is declared: a bad k would otherwise fail every submission
        self.key = key
        self.meta = meta
        self.message = message

    def _index(self) -> Any:
        return self.index if hasattr(self.index, "add_if_unique") else self.index()

    def __call__(self, form: Any, field: Any) -> None:
        earlier = getattr(field, "simdb_reservation", None)
        if earlier is not None and earlier.held:  # validated twice in one request: the earlier text given back
            earlier.rollback()  # (held, it would make this one wait for it, on this very thread)
        field.simdb_key = field.simdb_reservation = None
        if isinstance(field.data, str) and not field.errors:
            problem = text_problem(field.data)  # empty, NUL: the user's error, on this field
            if problem is not None:
                raise StopValidation(problem)
        # field.errors: an earlier validator of this field that raised ValidationError (Length, Regexp);
        # WTForms goes on down the chain after it: the form is refused anyway
        if not isinstance(field.data, str) or field.errors or any(f.errors for f in form if f is not field):
            return
        key = self.key(form) if self.key is not None else uuid.uuid4().hex
        meta = self.meta(form) if self.meta is not None else None
        _refuse_nul_elsewhere(form, field, meta)
        try:
            reservation = reserve(self._index(), key, field.data, k=self.k, meta=meta)
        except NearDuplicateError as exc:
            raise ValidationError(self.message or str(exc)) from None
        except InputTooLargeError as exc:  # the user's text is over the index's maximum text size
            raise ValidationError(too_large_message(exc)) from None
        field.simdb_key, field.simdb_reservation = key, reservation
        _hold_until_response(form, reservation)
