"""Django integration, without SQLAlchemy in the request path.

- :class:`simdb.django.fields.FingerprintField`: unsigned 64-bit fingerprint in
  Python, two's-complement ``bigint`` in PostgreSQL; optional ``source=`` text
  field it is computed from on save; lookup ``fp__near=(text_or_fp, k)``.
- :class:`simdb.django.models.SimhashModel`: abstract model with ``fp`` and the
  generated, indexed block columns ``b0..b3``, and a manager whose queryset has
  ``near_duplicates(text_or_fp, k=3)``.
- :class:`simdb.django.verified.VerifiedSimhashModel` (recommended for new models): the same
  plus a ``simdb_sketch`` array and its ``simdb_rule``; ``near_duplicates(text)`` answers by the
  model rules of :mod:`simdb.core.model_verifier` (Jaccard of character 4-grams >= 0.8 among
  candidates within 11 bits, rule 2; rows written before it by token 3-grams, rule 1, until
  ``recompute_sketches`` moves them; docs/verified-models.md, docs/django.md).
- :class:`simdb.django.functions.HammingDistance`: ``bit_count((a # b)::bit(64))``.
- :class:`simdb.django.operations.InstallSimdbFunctions`: a migration operation
  creating simdb's SQL functions (``simdb_hamming``, ``simdb_blocks``).

Import the submodules directly (``from simdb.django.models import SimhashModel``);
``simdb.django.models`` needs Django's app registry to be ready, as any models module.
"""
