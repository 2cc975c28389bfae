"""Refuse near-duplicate texts in Django forms, models and Django REST framework serializers.

Django's own answer to "this value must be unique" has two halves, and so does this module:

- a *check* that gives the user a message on the field: :class:`NotNearDuplicate`, a field
  validator for ``validators=[...]`` of a form field (or a DRF serializer field, which accepts
  Django validators), and :func:`refuse_near_duplicate` for a model's ``clean()``;
- an *atomic store*: :func:`save_unless_near_duplicate` checks again and saves in one
  transaction, under a transaction-level advisory lock on the model's table, so that of two
  near-identical submissions arriving at once exactly one is saved and the other gets the
  same ``ValidationError`` as from the form.

Why both, as ``validate_unique`` plus a unique constraint: the check alone races (two requests
both pass it, then both save); the lock alone would tell the user only at save time. Why the
app's own table (a :class:`~simdb.django.models.SimhashModel` or, for new models,
:class:`~simdb.django.verified.VerifiedSimhashModel`) and not simdb's collection: the row is
then written in the request's own transaction, so a request that fails after the check leaves
nothing behind, and no SQLAlchemy runs in the request path. Why one lock per table and not per
fingerprint block (as :func:`simdb.validators.admit` does): verified models find candidates up to
11 bits away, which share no block value for sure; the lock is held for one indexed query.

The words of the refusal are :func:`simdb.validators.refusal_message`'s, the same in every framework.
"""

from __future__ import annotations

from typing import Any

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import connections, router, transaction
from django.utils.deconstruct import deconstructible

from simdb import results
from simdb.core.bits import BITS
from simdb.core.validate import check_k
from simdb.errors import InvalidArgumentError
from simdb.validators import measures, refusal_message

__all__ = [
    "NearDuplicateFormMixin", "NotNearDuplicate", "nearest_duplicate", "refuse_near_duplicate", "save_unless_near_duplicate",
]

#: ``ValidationError.code`` of every refusal (forms and DRF show it to API clients)
CODE = "near_duplicate"


def _model(model: Any) -> Any:
    if isinstance(model, str):
        return apps.get_model(model)
    return model


def _source(model: Any) -> str:
    source = getattr(model, "simhash_source", None)
    if not source:
        raise InvalidArgumentError(f"{model.__name__} has no simhash_source: set simhash_source = 'body' on the model")
    return source


def nearest_duplicate(model: Any, text: str, *, k: int = 3, exclude_pk: Any = None) -> Any:
    """The stored row of ``model`` that ``text`` nearly duplicates (nearest first), or None.

    ``model``: a SimhashModel or VerifiedSimhashModel subclass, or its ``"app_label.Model"``."""
    qs = _model(model).objects.near_duplicates(text, k=k)
    if exclude_pk is not None:
        qs = qs.exclude(pk=exclude_pk)
    return qs.first()


def _error(row: Any) -> ValidationError:
    # the model's field reads the fingerprint unsigned, as a Match holds it: built directly, not by
    # results.match (which takes the store's signed bigint)
    d = int(row.distance)
    m = results.Match(str(row.pk), row.fp or 0, d, 1.0 - d / BITS, getattr(row, "jaccard", None))
    return ValidationError(refusal_message(m), code=CODE, params={"pk": row.pk, **measures(m)})


@deconstructible
class NotNearDuplicate:
    """Field validator: refuse a text that nearly duplicates a stored row of ``model``.

    ``forms.CharField(validators=[NotNearDuplicate("posts.Post")])``; works in a DRF serializer
    field's ``validators`` too. A check only: save with :func:`save_unless_near_duplicate`.

    An edit must not be refused as a near-duplicate of the row it edits, so the check excludes that
    row: ``exclude_pk``; in a DRF serializer, the serializer's ``instance`` (DRF passes the field,
    ``requires_context``); in a ``ModelForm``, the form's ``instance`` through
    :class:`NearDuplicateFormMixin` (a Django form field validator is given the value only).
    """

    #: DRF calls ``validator(value, serializer_field)``; Django forms and models call ``validator(value)``
    requires_context = True

    def __init__(self, model: Any, k: int = 3, exclude_pk: Any = None):
        self.model = model
        self.k = check_k(k)  # when the form is declared: a bad k would otherwise fail every submission
        self.exclude_pk = exclude_pk

    def excluding(self, pk: Any) -> NotNearDuplicate:
        """The same validator, not refusing the text of row ``pk`` (the row being edited)."""
        return NotNearDuplicate(self.model, self.k, exclude_pk=pk)

    def _edited_pk(self, serializer_field: Any) -> Any:
        instance = getattr(getattr(serializer_field, "parent", None), "instance", None)
        if instance is not None and isinstance(instance, _model(self.model)):
            return instance.pk
        return self.exclude_pk

    def __call__(self, value: Any, serializer_field: Any = None) -> None:
        if isinstance(value, str):
            row = nearest_duplicate(self.model, value, k=self.k, exclude_pk=self._edited_pk(serializer_field))
            if row is not None:
                raise _error(row)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NotNearDuplicate) and (self.model, self.k, self.exclude_pk) == (
            other.model, other.k, other.exclude_pk)


class NearDuplicateFormMixin:
    """``ModelForm`` mixin: the form's :class:`NotNearDuplicate` validators exclude the edited instance.

    ``class CommentForm(NearDuplicateFormMixin, forms.ModelForm)``. Why a mixin: a form field's
    validators are called with the value alone, so without it ``CommentForm(data, instance=comment)``
    refuses the comment's own text (or a small correction of it) as a near-duplicate of itself.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        pk = getattr(getattr(self, "instance", None), "pk", None)
        if pk is not None:
            for field in self.fields.values():  # type: ignore[attr-defined]  # a Form's per-instance fields
                field.validators = [v.excluding(pk) if isinstance(v, NotNearDuplicate) else v for v in field.validators]


def refuse_near_duplicate(instance: Any, *, k: int = 3) -> None:
    """For ``Model.clean()``: ``ValidationError({source_field: ...})`` when the instance's text
    nearly duplicates another stored row (the instance itself excluded, so an edit may keep its text)."""
    source = _source(type(instance))
    text = getattr(instance, source)
    if isinstance(text, str):
        row = nearest_duplicate(type(instance), text, k=k, exclude_pk=instance.pk)
        if row is not None:
            raise ValidationError({source: [_error(row)]})


def save_unless_near_duplicate(instance: Any, *, k: int = 3, using: str | None = None, **save_kwargs: Any) -> Any:
    """Save ``instance`` unless its text nearly duplicates another row; atomic under concurrency.

    In one transaction (a savepoint inside the caller's): ``pg_advisory_xact_lock`` on the model's
    table, :func:`refuse_near_duplicate`, ``instance.save()``. Raises the same ``ValidationError``
    as the form would; returns the instance. Inside an outer transaction (``ATOMIC_REQUESTS``) the
    lock is held until that transaction ends, as it must be: the new row is invisible to other
    requests until then, so releasing the lock earlier would let one of them save a near-duplicate.
    """
    model = type(instance)
    db = using or router.db_for_write(model, instance=instance)
    with transaction.atomic(using=db):
        with connections[db].cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", [f"simdb-near-duplicates:{model._meta.db_table}"])
        refuse_near_duplicate(instance, k=k)
        instance.save(using=db, **save_kwargs)
    return instance
