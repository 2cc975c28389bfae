"""Database functions for Django querysets."""

from __future__ import annotations

from django.db import models
from django.db.models import Func, Value

from simdb.core.bits import to_signed

__all__ = ["HammingDistance"]


def _arg(value):
    if isinstance(value, bool):
        raise TypeError("a fingerprint must be an int, got bool")
    if isinstance(value, int):  # an unsigned fingerprint -> its bigint form
        return Value(to_signed(value), output_field=models.BigIntegerField())
    return value  # a field name or an expression


class HammingDistance(Func):
    """``bit_count((a # b)::bit(64))::int``: differing bits between two fingerprints.

    Each argument is a field name, an expression or an unsigned int fingerprint:

        Post.objects.annotate(d=HammingDistance("fp", 0x1234)).filter(d__lte=3)
        Post.objects.annotate(d=HammingDistance("fp", OuterRef("fp")))
    """

    arity = 2
    arg_joiner = " # "
    template = "bit_count((%(expressions)s)::bit(64))::int"
    output_field = models.IntegerField()

    def __init__(self, a, b, **extra):
        super().__init__(_arg(a), _arg(b), **extra)
