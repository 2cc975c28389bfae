"""A FastAPI dependency that reserves a request body's text in a simdb collection or answers 409,
and stores it only if the request succeeds.

For example:

    refuse = NotNearDuplicate(NewPost, text="body")

    @app.post("/posts", status_code=201)
    async def create_post(admitted: Annotated[Admitted, Depends(refuse)]):
        return {"id": admitted.key, **admitted.item.model_dump()}

Why a dependency and not a Pydantic validator: Pydantic validators are synchronous, and
:class:`simdb.aio.AsyncSimhashIndex` is not; a dependency runs in the request's event loop with
the validated body. Why it reserves (:func:`simdb.validators.reserve_async`) rather than checks,
and commits only once the request has succeeded: :mod:`simdb.validators`; a dependency with
``yield`` sees the request fail after the text is admitted (a later dependency answers 401, the
path operation raises), so the text is committed when the request's dependencies close without an
error and rolled back otherwise. ``admitted.key`` is the key it is stored under. An edit names its own key (``key=lambda item, request: request.path_params["post_id"]``):
the row stored under it is the text's earlier version, replaced, never its near-duplicate.

A near-duplicate gets ``409`` with
``{"detail": {"error": "near-duplicate", "message": ..., "match": KEY, "jaccard": j, "distance": d}}``:
the key of the stored near-duplicate and the measures under simdb's names
(:func:`simdb.validators.measures`: ``jaccard`` None and ``similarity`` = 1 - d/64 in a Hamming collection).
An empty text, a NUL character, or a text over the index's maximum size is a ``422`` on its field.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError

from simdb.core.validate import check_k
from simdb.errors import InputTooLargeError, InvalidArgumentError
from simdb.validators import NearDuplicateError, measures, nul_paths, reserve_async, text_problem, too_large_message

__all__ = ["Admitted", "NotNearDuplicate"]


@dataclass(frozen=True)
class Admitted:
    """What the dependency gives the path operation: the validated body and the key its text is stored under."""

    item: Any
    key: str


def _app_index(request: Request) -> Any:
    """The app's collection, set in its lifespan; a missing one is said as such (a bare
    ``AttributeError`` from Starlette's ``State`` would not say what to do)."""
    index = getattr(request.app.state, "simdb_index", None)
    if index is None:
        raise InvalidArgumentError(
            "index: NotNearDuplicate was given no index= and the app has no app.state.simdb_index: set it "
            "(an AsyncSimhashIndex) in the app's lifespan, or pass index= (docs/fastapi.md)"
        )
    return index


def _check_text_field(body: type, text: str) -> None:
    """``text`` must name a field of a Pydantic body, checked when the route is defined, not at the
    first request (where a typo would be a 500)."""
    fields = getattr(body, "model_fields", None)
    if not isinstance(text, str) or (isinstance(fields, dict) and text not in fields):
        known = ", ".join(fields) if isinstance(fields, dict) else "?"
        raise InvalidArgumentError(f"text: {getattr(body, '__name__', body)!s} has no field {text!r} (its fields: {known})")


def _refuse_nul_in_body(item: Any, meta: Any) -> None:
    """A NUL character (``\u0000``) in a request's field that goes into the stored meta: ``422`` naming the field.

    Why: PostgreSQL's jsonb cannot hold it, so :func:`~simdb.validators.reserve_async` refuses the meta with
    ``InvalidArgumentError``, which is the client's input here (the default meta is the body itself),
    not the app's: it must be the same ``422`` as any invalid field, not a ``500``. A NUL that no
    field of the body holds came from the app's own ``meta=`` and stays its error."""
    if not nul_paths(meta):
        return
    dump = item.model_dump(mode="json", by_alias=True) if hasattr(item, "model_dump") else None
    errors = [
        {"type": "string_nul", "loc": ("body", *path), "input": value,
         "msg": "Value must not contain a NUL character (\\u0000), which PostgreSQL cannot store"}
        for path, value in nul_paths(dump)
    ]
    if errors:
        raise RequestValidationError(errors)


def _takes_request(key: Callable | None) -> bool:
    """Does ``key`` take ``(item, request)`` (an edit's key from the path) rather than ``(item)``?"""
    if key is None:
        return False
    try:
        params = inspect.signature(key).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: called with the item
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    return len(positional) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in positional)


def _refuse_bad_text(field: str, text: Any) -> None:
    """An empty text or a NUL in it: ``422`` on its field, as every framework says it
    (:func:`simdb.validators.text_problem`)."""
    problem = text_problem(text)
    if problem is not None:
        kind = "string_nul" if "NUL" in problem else "string_too_short"
        raise RequestValidationError([{"type": kind, "loc": ("body", field), "input": None, "msg": problem}])


class NotNearDuplicate:
    """Dependency factory: ``Depends(NotNearDuplicate(Model, text="body"))`` -> :class:`Admitted`.

    ``index``: an :class:`simdb.aio.AsyncSimhashIndex`, or a callable ``(request) -> index``
    (default ``request.app.state.simdb_index``, set in the app's lifespan). ``key(item)`` or
    ``key(item, request)``: the key (default a random hex id; an edit's route names the row it edits,
    ``request.path_params[...]``); ``meta(item)``: JSON meta to store (default the body as a dict);
    ``k``: the Hamming radius of a Hamming collection; ``status_code``: of a refusal (409).
    """

    def __init__(
        self, body: type, *, text: str, index: Any = None, k: int = 3, key: Callable[..., str] | None = None,
        meta: Callable[[Any], Any] | None = None, status_code: int = 409,
    ):
        _check_text_field(body, text)
        k = check_k(k)  # when the route is defined: a bad k would otherwise make every request a 500
        self.body, self.text, self.k, self.key, self.meta, self.status_code = body, text, k, key, meta, status_code
        self._key_takes_request = _takes_request(key)
        if index is None:
            index = _app_index
        self.index = index if callable(index) and not hasattr(index, "add_if_unique") else (lambda request: index)
        # FastAPI reads the body's model from the signature: the body is the one parameter typed ``body``
        self.__signature__ = inspect.Signature([
            inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request),
            inspect.Parameter("item", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=body),
        ])

    def _key(self, item: Any, request: Request) -> str:
        if self.key is None:
            return uuid.uuid4().hex
        return self.key(item, request) if self._key_takes_request else self.key(item)

    async def __call__(self, request: Request, item: Any) -> AsyncIterator[Admitted]:
        """Reserve the text, give the path operation :class:`Admitted`, then commit the text if the
        request's dependencies close without an error, else roll it back (see the module docstring)."""
        key = self._key(item, request)
        text = getattr(item, self.text)
        _refuse_bad_text(self.text, text)
        meta = self.meta(item) if self.meta is not None else item.model_dump(mode="json")
        _refuse_nul_in_body(item, meta)
        try:
            reservation = await reserve_async(self.index(request), key, text, k=self.k, meta=meta)
        except NearDuplicateError as exc:
            detail = {"error": "near-duplicate", "message": str(exc), "match": exc.match.key, **measures(exc.match)}
            raise HTTPException(status_code=self.status_code, detail=detail) from None
        except InputTooLargeError as exc:  # the posted text's size: the client's error, on its field (no echo of it)
            raise RequestValidationError([{"type": "string_too_long", "loc": ("body", self.text), "input": None,
                                           "msg": too_large_message(exc)}]) from None
        try:
            yield Admitted(item, key)
        except BaseException:
            await reservation.rollback()
            raise
        await reservation.commit()
