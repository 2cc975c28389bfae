"""Helpers shared by the Django modules (pure Python: no Django models, no SQLAlchemy)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, NamedTuple

from simdb.core.fingerprint import Fingerprinter
from simdb.core.fingerprint import query_fingerprint as _query_fingerprint
from simdb.core.model_verifier import (
    MODEL_RULE,
    MODEL_RULES,
    model_fingerprinter,
    model_sketch_and_keys,
    model_verifier,
)

__all__ = [
    "BLOCK_FIELDS", "ModelQuery", "default_fingerprinter", "fingerprinter_of", "int4_array", "model_query",
    "query_fingerprint", "text_band_keys", "text_sketch",
]

#: how many texts' features the Django adapter remembers (see :func:`query_fingerprint`)
MEMO_TEXTS = 4


@lru_cache(maxsize=MEMO_TEXTS)
def _text_fp(fingerprinter: Any, text: str) -> int | None:
    return _query_fingerprint(text, fingerprinter)


def query_fingerprint(query: Any, fingerprinter: Any = None) -> int | None:
    """:func:`simdb.core.fingerprint.query_fingerprint`, a text's remembered for the
    next call (the last :data:`MEMO_TEXTS` texts).

    Why: one Django post computes a text's features three times over: the form's validator
    (``near_duplicates``), :func:`~simdb.django.validators.save_unless_near_duplicate`'s check
    again under its lock, and ``save()`` (the fields' ``pre_save``). For a 5 MB post that was three
    tokenizations, seconds each; remembered, one."""
    if isinstance(query, str) and fingerprinter is not None:
        return _text_fp(fingerprinter, query)
    return _query_fingerprint(query, fingerprinter)


@lru_cache(maxsize=MEMO_TEXTS)
def _text_sketch(verifier: Any, text: str) -> tuple | None:
    sk = verifier.sketch(text)
    return None if sk is None else tuple(sk)


@lru_cache(maxsize=MEMO_TEXTS)
def _model_features(text: str) -> tuple[tuple | None, tuple | None]:
    sk, keys = model_sketch_and_keys(text)
    return (None if sk is None else tuple(sk)), (None if keys is None else tuple(keys))


def text_sketch(verifier: Any, text: str) -> list[int] | None:
    """``verifier.sketch(text)`` (a new list each call), remembered as :func:`query_fingerprint` is.
    Under the model rule's verifier, from the same pass as the text's band keys (:func:`text_band_keys`,
    :func:`simdb.core.model_verifier.model_sketch_and_keys`): a post needs both."""
    sk = _model_features(text)[0] if verifier == model_verifier() else _text_sketch(verifier, text)
    return None if sk is None else list(sk)


def text_band_keys(text: str | None) -> list[int] | None:
    """:func:`simdb.core.model_verifier.model_band_keys`, remembered as :func:`query_fingerprint` is
    (with the model rule's sketch: :func:`text_sketch`)."""
    if text is None:
        return None
    keys = _model_features(text)[1]
    return None if keys is None else list(keys)


class ModelQuery(NamedTuple):
    """What a verified model's query asks with, for a text: ``fp`` (the candidate Fingerprinter's;
    None: no features, nothing matches), ``sketches``: (rule, the text's sketch under it as
    :func:`int4_array` text, the rule's sketch size) for each model rule under which the text has
    shingles, and ``keys``: its rule-2 band keys (None when it has no sketch or no keys)."""

    fp: int | None
    sketches: tuple[tuple[int, str, int], ...]
    keys: tuple[int, ...] | None


@lru_cache(maxsize=MEMO_TEXTS)
def model_query(text: str) -> ModelQuery:
    """The :class:`ModelQuery` of ``text`` under the model rules (a model with the default verifier),
    remembered as :func:`query_fingerprint` is, from the same memos the model's ``save()`` reads.

    Why one call: a post's check needs all of these, and asking for each apart compared and hashed
    verifiers at every step (the route of a Django check is bounded by tests/test_house_walks.py)."""
    fp = _text_fp(model_fingerprinter(), text)
    if fp is None:
        return ModelQuery(None, (), None)
    sketches = []
    for number, rule in MODEL_RULES.items():
        sk = _model_features(text)[0] if number == MODEL_RULE else _text_sketch(rule.verifier(), text)
        if sk:
            sketches.append((number, int4_array(list(sk)), rule.size))
    keys = _model_features(text)[1] if sketches else None
    return ModelQuery(fp, tuple(sketches), keys)


BLOCK_FIELDS = ("b0", "b1", "b2", "b3")


@lru_cache(maxsize=1)
def default_fingerprinter() -> Fingerprinter:
    """The default Fingerprinter, built once per process (its stopword table and jieba are not free)."""
    return Fingerprinter()


def fingerprinter_of(field: Any, model: Any) -> Any:
    """The Fingerprinter of a fingerprint field: its own ``fingerprinter``, else the model's (class or
    instance) ``simhash_fingerprinter``, else :func:`default_fingerprinter`."""
    return getattr(field, "fingerprinter", None) or getattr(model, "simhash_fingerprinter", None) or default_fingerprinter()


def int4_array(values: list[int]) -> str:
    """``values`` (ints, already checked) as the text of an ``int4[]`` value, ``"{1,2,3}"``: the
    query parameter for ``%s::int4[]``.

    Why text and not the list: Django's psycopg 3 backend binds client-side by default, and psycopg
    renders a list element by element in Python; a verified query's 12 arrays (four block-probe
    arrays, 548 values at ``K = 11``, and its sketches, 256 values, each written four times) took
    3.1 ms a query to render, more than PostgreSQL took to plan the statement
    (``benchmarks/bench_django_verified.py``). One string is quoted in one call, client-side or sent
    as one value server-side (``OPTIONS["server_side_binding"]``), and PostgreSQL parses the same
    array from it."""
    return "{" + ",".join(map(str, values)) + "}"
