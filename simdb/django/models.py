"""``SimhashModel``: an abstract model adding a fingerprint and its indexed blocks."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models.functions import Cast

from simdb.core.validate import check_k

from ._common import fingerprinter_of, query_fingerprint
from .fields import CheckedNear, FingerprintField
from .functions import HammingDistance

__all__ = ["SimhashManager", "SimhashModel", "SimhashQuerySet", "block_expression"]


def block_expression(field: str, i: int):
    """Django expression of block ``i``: ``((fp >> 48) & 65535)::integer`` for b0 ... ``(fp & 65535)::integer`` for b3.

    The same values as simdb's store derives in its ``b0..b3`` columns.
    """
    shift = 64 - 16 * (i + 1)
    expr = models.F(field)
    if shift:
        expr = expr.bitrightshift(shift)
    return Cast(expr.bitand(65535), models.IntegerField())


def _block(i: int):
    return models.GeneratedField(
        expression=block_expression("fp", i),
        output_field=models.IntegerField(),
        db_persist=True,
        db_index=True,
    )


class SimhashQuerySet(models.QuerySet):
    def near_duplicates(self, query: Any, k: int = 3, *, field: str = "fp"):
        """Rows within ``k`` bits of ``query`` (text or unsigned fp), annotated with ``distance``,
        ordered by distance then pk. Uses the block indexes; a text with no features matches nothing."""
        k = check_k(k, default=None)  # here only: the fp__near condition below takes it as checked
        model = self.model
        fpr = fingerprinter_of(model._meta.get_field(field), model) if isinstance(query, str) else None
        fp = query_fingerprint(query, fpr)
        if fp is None:
            return self.none()
        return (
            self.filter(**{f"{field}__near": CheckedNear(fp, k)})
            .annotate(distance=HammingDistance(field, fp))
            .order_by("distance", "pk")
        )


SimhashManager = models.Manager.from_queryset(SimhashQuerySet)


class SimhashModel(models.Model):
    """Abstract model: ``fp`` (nullable :class:`FingerprintField`) and generated ``b0..b3``
    (``GENERATED ALWAYS AS (...) STORED``), each with a btree index.

    Set ``simhash_source = "body"`` to compute ``fp`` from that field on save, and
    optionally ``simhash_fingerprinter`` (default ``simdb.Fingerprinter()``).
    ``objects.near_duplicates(text_or_fp, k=3)`` and the lookup ``fp__near=(x, k)``
    search through the block indexes.
    """

    simhash_source: str | None = None
    simhash_fingerprinter: Any = None

    fp = FingerprintField(null=True, blank=True)
    b0 = _block(0)
    b1 = _block(1)
    b2 = _block(2)
    b3 = _block(3)

    objects = SimhashManager()

    class Meta:
        abstract = True
