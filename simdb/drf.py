"""Django REST framework: refuse near-duplicate texts in serializers, atomically.

Two parts, as for Django forms (:mod:`simdb.django.validators`, whose docstring says why):

- the field check: DRF runs Django validators, so ``serializers.CharField(validators=[
  NotNearDuplicate("posts.Post")])`` answers 400 with ``{"body": ["near-duplicate of '1'
  (Jaccard similarity 0.93)"]}`` at ``is_valid()`` (an update's own row left out: DRF gives the
  validator the serializer, whose ``instance`` is the row being edited);
- the atomic store: :class:`NearDuplicateRefusingMixin` on a ``ModelSerializer`` saves through
  :func:`~simdb.django.validators.save_unless_near_duplicate`, so a near-duplicate that arrives
  between ``is_valid()`` and ``save()`` (a concurrent request) is refused with the same 400
  instead of being stored twice.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from simdb.django.validators import NotNearDuplicate, save_unless_near_duplicate

__all__ = ["NearDuplicateRefusingMixin", "NotNearDuplicate"]


class NearDuplicateRefusingMixin:
    """``ModelSerializer`` mixin: ``create()`` and ``update()`` save unless near-duplicate, atomically.

    ``simdb_k`` (default 3): the Hamming radius (of rows without a sketch, for a verified model).
    Many-to-many fields are not handled here: set them after ``save()``.
    """

    simdb_k = 3

    def _field_name(self, model_field: str) -> str:
        """The serializer's name for a model field: the refusal names the model's text field, and a client
        that posts ``text`` (``CharField(source="body")``) must see its error under ``text``, as at ``is_valid()``."""
        fields = self.fields  # type: ignore[attr-defined]  # a Serializer's fields
        return next((name for name, f in fields.items() if getattr(f, "source", None) == model_field), model_field)

    def _save(self, instance: Any) -> Any:
        try:
            return save_unless_near_duplicate(instance, k=self.simdb_k)
        except DjangoValidationError as exc:
            detail = serializers.as_serializer_error(exc)
            raise serializers.ValidationError({self._field_name(k): v for k, v in detail.items()}) from None

    def create(self, validated_data: dict) -> Any:
        return self._save(self.Meta.model(**validated_data))  # type: ignore[attr-defined]  # a ModelSerializer's Meta

    def update(self, instance: Any, validated_data: dict) -> Any:
        for name, value in validated_data.items():
            setattr(instance, name, value)
        return self._save(instance)
