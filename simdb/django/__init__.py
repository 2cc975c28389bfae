"""Django integration, without SQLAlchemy in the request path.

- :class:`simdb.django.fields.FingerprintField`: unsigned 64-bit fingerprint in
  Python, two's-complement ``bigint`` in PostgreSQL; optional ``source=`` text
  field it is computed from on save; lookup ``fp__near=(text_or_fp, k)``.
- :class:`simdb.django.models.SimhashModel`: abstract model with ``fp`` and the
  generated, indexed block columns ``b0..b3``, and a manager whose queryset has
  ``near_duplicates(text_or_fp, k=3)``.
- :class:`simdb.django.verified.VerifiedSimhashModel` (recommended for new models): the same
  plus a ``simdb_sketch`` array; ``near_duplicates(text)`` answers by the model rule of
  :mod:`simdb.core.model_verifier` (Jaccard of token 3-grams >= 0.8 among candidates within 11 bits,
  not a collection's character-gram rule; docs/verified-models.md).
- :class:`simdb.django.functions.HammingDistance`: ``bit_count((a # b)::bit(64))``.
- :class:`simdb.django.operations.InstallSimdbFunctions`: a migration operation
  creating simdb's SQL functions (``simdb_hamming``, ``simdb_blocks``).

Import the submodules directly (``from simdb.django.models import SimhashModel``);
``simdb.django.models`` needs Django's app registry to be ready, as any models module.
"""
