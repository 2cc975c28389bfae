"""``FingerprintField``: an unsigned 64-bit SimHash stored as a PostgreSQL ``bigint``."""

from __future__ import annotations

from contextlib import suppress
from typing import Any, NamedTuple

from django.core import checks, exceptions
from django.db import models
from django.db.models import Lookup

from simdb.core.bits import MASK64, block_query, to_signed, to_unsigned
from simdb.core.validate import check_k

from ._common import BLOCK_FIELDS, fingerprinter_of, int4_array, query_fingerprint

__all__ = ["CheckedNear", "FingerprintField", "NearLookup"]


class FingerprintField(models.BigIntegerField):
    """Unsigned fingerprint in Python (0..2^64-1), two's complement ``bigint`` in the database.

    ``source``: name of a text field on the same model; when given (or when the
    model has a ``simhash_source`` attribute) the fingerprint is computed from it
    on every save with ``fingerprinter`` (or the model's ``simhash_fingerprinter``,
    default ``simdb.Fingerprinter()``). Texts with no features store NULL.
    """

    description = "SimHash fingerprint (unsigned 64-bit, stored as bigint)"

    def __init__(self, *args, source: str | None = None, fingerprinter: Any = None, **kwargs):
        self.source = source
        self.fingerprinter = fingerprinter
        super().__init__(*args, **kwargs)

    def deconstruct(self):
        name, path, args, kwargs = super().deconstruct()
        if self.source is not None:
            kwargs["source"] = self.source
        return name, path, args, kwargs

    @property
    def validators(self):
        # the unsigned range, not BigIntegerField's signed one
        return list(self._validators) + [_validate_unsigned]

    def check(self, **kwargs):
        errors = super().check(**kwargs)
        source = self.source
        if source is not None:
            try:
                self.model._meta.get_field(source)
            except exceptions.FieldDoesNotExist:
                errors.append(checks.Error(f"source field {source!r} does not exist", obj=self, id="simdb.E001"))
        return errors

    def to_python(self, value):
        if value is None or isinstance(value, int) and not isinstance(value, bool):
            return value
        return super().to_python(value)

    def get_prep_value(self, value):
        value = super(models.BigIntegerField, self).get_prep_value(value)
        if value is None or hasattr(value, "resolve_expression"):
            return value
        return to_signed(int(value))

    def from_db_value(self, value, expression, connection):
        return None if value is None else to_unsigned(value)

    def pre_save(self, model_instance, add):
        source = self.source or getattr(model_instance, "simhash_source", None)
        if source:
            text = getattr(model_instance, source)
            setattr(model_instance, self.attname, None if text is None else query_fingerprint(text, fingerprinter_of(self, model_instance)))
        return super().pre_save(model_instance, add)

    def formfield(self, **kwargs):
        return super().formfield(**{"min_value": 0, "max_value": MASK64, **kwargs})


class CheckedNear(NamedTuple):
    """The value of ``fp__near`` from simdb's own querysets: a fingerprint (unsigned) and a radius
    already checked, which the lookup takes as they are.

    Why: ``near_duplicates`` checks ``k`` and fingerprints the text before it builds the query (it
    needs both first), so the lookup need not do either again. A plain ``(text_or_fp, k)`` is checked here."""

    fp: int
    k: int


def _validate_unsigned(value):
    if value is not None and not 0 <= value <= MASK64:
        raise exceptions.ValidationError("fingerprint must be in [0, 2**64)", code="invalid", params={"value": value})


@FingerprintField.register_lookup
class NearLookup(Lookup):
    """``fp__near=(query, k)`` (or ``fp__near=query`` for k=3): rows within ``k`` bits of ``query``.

    ``query`` is an unsigned fingerprint or a text (fingerprinted with the model's
    fingerprinter). When the model has the block fields ``b0..b3`` (``SimhashModel``)
    the condition probes them first, so PostgreSQL answers from the block indexes:

        (b0 = ANY(%s::int4[]) OR b1 = ANY(%s::int4[]) OR ...)
        AND bit_count((fp # q)::bit(64)) <= k

    (a block with one probe value: ``b0 = %s``); each block's probes travel as one parameter, the
    text of the array (:func:`simdb.django._common.int4_array`: cheap to bind client-side).
    """

    lookup_name = "near"
    prepare_rhs = False  # the query as given: Lookup.get_prep_lookup returns it unchanged
    can_use_none_as_rhs = False

    def _query(self):
        rhs = self.rhs
        if isinstance(rhs, CheckedNear):
            return rhs
        if isinstance(rhs, (tuple, list)):
            if len(rhs) != 2:
                raise ValueError("near lookup takes (text_or_fp, k) or text_or_fp")
            query, k = rhs
        else:
            query, k = rhs, 3
        check_k(k, default=None)
        field = self.lhs.output_field
        fpr = fingerprinter_of(field, getattr(field, "model", None)) if isinstance(query, str) else None
        return query_fingerprint(query, fpr), k

    def as_sql(self, compiler, connection):
        fp, k = self._query()
        if fp is None:
            return "FALSE", []
        lhs_sql, lhs_params = compiler.compile(self.lhs)
        query = block_query(fp, k)  # the probes and the signed value, in one call
        tests, params = [], []
        alias = getattr(self.lhs, "alias", None)
        model = getattr(getattr(self.lhs, "target", None), "model", None)
        block_fields = []
        if model is not None and alias is not None:
            with suppress(exceptions.FieldDoesNotExist):  # a model without the block fields: Hamming test only
                block_fields = [model._meta.get_field(name) for name in BLOCK_FIELDS]
        for f, values in zip(block_fields, query.probes):
            if not values:
                continue
            col_sql, col_params = compiler.compile(f.get_col(alias))
            if len(values) == 1:
                tests.append(f"{col_sql} = %s")
            else:
                tests.append(f"{col_sql} = ANY(%s::int4[])")
                values = [int4_array(values)]
            params += [*col_params, *values]
        prefix = "(" + " OR ".join(tests) + ") AND " if tests else ""
        sql = f"{prefix}bit_count(({lhs_sql} # %s::bigint)::bit(64)) <= %s"
        return sql, params + list(lhs_params) + [query.signed, k]
