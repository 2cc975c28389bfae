"""The model rules of the helpers on a host app's own tables, pinned and versioned.

A simdb collection records its shingle scheme in its config (``config["verify"]["scheme"]``), so
a simdb release that changes :data:`simdb.core.sketch.SCHEME` keeps answering old collections with
their own scheme. A host table (:mod:`simdb.sqlalchemy.verified`, :mod:`simdb.django.verified`)
has no config: it records, **per row**, the model rule its sketch was computed under, in the
nullable ``smallint`` column ``simdb_rule`` (:data:`RULE_COLUMN`). Each rule is a literal that a
release may not change (:data:`MODEL_RULES`); a new rule is a new number.

* **Rule 1** (``simdb_rule`` NULL: every row written before rule 2 existed): Jaccard of token
  3-gram shingles >= 0.8 (scheme ``tok3-xxh64-v3``, 384-value sketches). It finds a one-typo copy
  of a 12-30-word comment about 60 % of the time: one edited word changes 3 of a short text's ~20
  token 3-grams, Jaccard ~0.75.
* **Rule 2** (:data:`MODEL_RULE`, new rows since issue 26): Jaccard of character 4-gram
  shingles >= 0.8 (scheme ``chr4-fmix64-v4``, 256-value sketches), the rule of new simdb collections, right at
  every length (docs/near-duplicates.md).

Why per row, and why the query verifies each row under its own rule: an upgrade must neither
compare new query sketches with old stored ones (different hash values for the same text, Jaccard
near 0: every near-duplicate silently lost) nor require rewriting a large table before the app
can run. So a query computes the text's sketch under every rule its table may hold and each
candidate is compared with the one of its row's rule; old rows answer by rule 1 until
``recompute_sketches`` (SQLAlchemy, Django) moves them to rule 2. The column is a schema change,
so an upgrade that forgets the migration fails loudly ("column simdb_rule does not exist"), never
silently.

A model may instead choose its own :class:`~simdb.core.sketch.Verifier` (``Verifier(scheme=...)``,
or ``model_verifier(1)`` to stay on rule 1): then it owns that choice, every row is compared under
it, and ``simdb_rule`` holds 0 (:data:`OWN_RULE`).

The fingerprint in ``fp`` is the same under both rules (:func:`model_fingerprinter`, options written
out in :data:`MODEL_FINGERPRINTER_OPTIONS`), so no ``fp`` is recomputed. Candidates are the rows within
``K = 11`` bits (the block indexes), **or**, for rule-2 rows, the rows sharing at least
:data:`MODEL_MIN_SHARED` of the 14 LSH band keys of the text's character 4-grams (:func:`model_band_keys`,
stored in the 14 indexed ``int4`` columns :data:`BAND_COLUMNS`; the band scheme of new simdb
collections, :data:`MODEL_BAND_SCHEME`, pinned). Why both: the fingerprint of a short text moves more
bits per edit than a long one's, so ``K = 11`` alone misses about 7 % of one-typo copies of 12-15-word
comments that are well inside the rule (Jaccard 0.81-0.91, 12-14 bits apart; found by an audit of the
Django validators); the band keys do not depend on the distance (a pair at Jaccard 0.85 shares two keys
with probability 0.998), and the block probes stay for rule-1 rows, which have no keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from simdb.core.fingerprint import Fingerprinter
from simdb.core.sketch import SCHEMES, Verifier
from simdb.core.sketch import chars as _chars
from simdb.core.sketch.bands import BANDS, block_band_keys, min_shared
from simdb.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "BAND_COLUMNS",
    "MODEL_BAND_SCHEME",
    "MODEL_FINGERPRINTER_OPTIONS",
    "MODEL_K",
    "MODEL_MIN_JACCARD",
    "MODEL_MIN_SHARED",
    "MODEL_RULE",
    "MODEL_RULES",
    "OWN_RULE",
    "RULE_COLUMN",
    "ModelRule",
    "check_model_verifier",
    "model_band_keys",
    "model_fingerprinter",
    "model_sketch_and_keys",
    "model_verifier",
    "rule_of",
    "stored_rule",
]

#: options of the models' candidate Fingerprinter, written out (never follows a preset implicitly)
MODEL_FINGERPRINTER_OPTIONS: dict = {"tokenizer": "tokens", "stopwords": 2 / 3}

#: the threshold and candidate radius of every model rule
MODEL_MIN_JACCARD = 0.8
MODEL_K = 11

#: the column recording, per row, the rule its sketch was computed under (NULL: rule 1)
RULE_COLUMN = "simdb_rule"
#: ``simdb_rule`` of a row written by a model with its own verifier (compared under that verifier)
OWN_RULE = 0


@dataclass(frozen=True)
class ModelRule:
    """One model rule: its number (the value of ``simdb_rule``) and its sketches' scheme and size."""

    number: int
    scheme: str
    size: int

    def verifier(self) -> Verifier:
        return Verifier(k=MODEL_K, min_jaccard=MODEL_MIN_JACCARD, size=self.size, scheme=self.scheme)


#: every model rule, by number; literals a release may not change (a new rule is a new number). Rule 1 is
#: the rule of every row whose ``simdb_rule`` is NULL
MODEL_RULES: dict[int, ModelRule] = {
    1: ModelRule(1, "tok3-xxh64-v3", 384),
    2: ModelRule(2, "chr4-fmix64-v4", 256),
}
#: the rule of rows written now, by a model with the default verifier
MODEL_RULE = 2


#: the band scheme of rule-2 rows' keys (never follows simdb.core.sketch.bands.BAND_SCHEME implicitly)
MODEL_BAND_SCHEME = "oph-b14r5-m2-v3"
#: a row is a band candidate when it shares at least this many of the 14 keys with the query
MODEL_MIN_SHARED = min_shared(MODEL_BAND_SCHEME)
#: the indexed int4 columns holding a rule-2 row's band keys, in order (NULL on other rows)
BAND_COLUMNS: tuple[str, ...] = tuple(f"simdb_band{i}" for i in range(BANDS))


def model_band_keys(text: str | None) -> list[int] | None:
    """The 14 band keys a rule-2 row stores for ``text`` (int32, in :data:`BAND_COLUMNS` order), the
    same keys a new simdb collection stores for it; None for no text or one without word characters."""
    return model_sketch_and_keys(text)[1]


def model_sketch_and_keys(text: str | None) -> tuple[list[int] | None, list[int] | None]:
    """(``model_verifier().sketch(text)``, :func:`model_band_keys` of ``text``): what a rule-2 row
    stores, from one pass over the text's character grams.

    Why one pass: the keys are one-permutation minima of the same grams the sketch keeps the bottom
    of (:class:`simdb.core.sketch.bands.BlockBandKeys`), so computing them apart normalised, encoded
    and hashed a post's text a second time (0.18 s of a 5 MB text's features,
    ``benchmarks/bench_django_post.py``)."""
    if text is None:
        return None, None
    rule = MODEL_RULES[MODEL_RULE]
    hook = block_band_keys(1, MODEL_BAND_SCHEME, rule.scheme)
    assert hook is not None  # rule 2's schemes are character grams and one-permutation bands
    sketch = _chars.text_sketch(text, rule.size, hook, 0).tolist()
    keys = hook.keys()[0]
    return (sketch or None), (None if keys is None else [int(k) for k in keys])


@lru_cache(maxsize=1)
def model_fingerprinter() -> Fingerprinter:
    """The candidate Fingerprinter of every verified model (built once per process)."""
    return Fingerprinter(**MODEL_FINGERPRINTER_OPTIONS)


def model_verifier(rule: int = MODEL_RULE) -> Verifier:
    """The verifier of model rule ``rule`` (default: the rule new rows are written under)."""
    if isinstance(rule, bool) or not isinstance(rule, int) or rule not in MODEL_RULES:
        raise InvalidArgumentError(f"rule must be one of the model rules {sorted(MODEL_RULES)}, got {rule!r}")
    return MODEL_RULES[rule].verifier()


def rule_of(verifier: Verifier) -> int:
    """What a model with ``verifier`` writes in ``simdb_rule``: :data:`MODEL_RULE` for the default
    verifier (its rows are compared per rule), :data:`OWN_RULE` for any other (compared under it)."""
    return MODEL_RULE if verifier == model_verifier() else OWN_RULE


def stored_rule(value: int | None) -> int:
    """The rule a row's ``simdb_rule`` value names (NULL: rule 1, the rows written before the column)."""
    return 1 if value is None else value


def check_model_verifier(value: object, where: str) -> Verifier:
    """``value`` if it is a :class:`~simdb.core.sketch.Verifier` with a scheme this simdb computes."""
    if not isinstance(value, Verifier):
        raise InvalidTypeError(f"{where} must be a simdb.core.sketch.Verifier, got {type(value).__name__}")
    if value.scheme not in SCHEMES:
        raise InvalidArgumentError(f"{where}: shingle scheme {value.scheme!r} is unknown to this simdb (it knows {list(SCHEMES)})")
    return value
