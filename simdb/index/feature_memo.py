"""The features (fingerprint, sketch, band keys) of texts a verified collection's index was asked
about or told of ahead: ``near_many``'s memo of its last call and :meth:`FeatureMemoMixin.prepare`.

Why: ``simdb dedup`` asks about a batch, stores its survivors and asks about them again, and
prepares its next batch in a helper thread while the server answers the current one; computing
a text's features once, and ahead, keeps the client's tokenizing off the critical path. A mixin of
:class:`simdb.index.SimhashIndex` (through :class:`~simdb.index.search_methods.SearchMixin`); features
are a function of the text and of the collection's rule, so following a new rule empties both
(:mod:`simdb.index.config_methods`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from simdb.core import validate as _validate

__all__ = ["FEATURE_MEMO_MAX", "FeatureMemoMixin"]

#: near_many keeps the features of its last call's texts for the next when it had at most this
#: many (``simdb dedup`` asks about a batch of 5,000 and then about its survivors): ~1 kB a text
FEATURE_MEMO_MAX = 50_000


class FeatureMemoMixin:
    """``_text_features`` (with the memo) and ``prepare`` of :class:`simdb.index.SimhashIndex`."""

    # set by SimhashIndex.__init__
    rule: Any
    fingerprinter: Any
    max_text_bytes: int
    #: the last near_many call's text features (see _text_features); replaced, never mutated
    _feature_memo: dict[str, tuple[int | None, Any, Any]] = {}
    #: features computed ahead by :meth:`prepare` (its last two calls' texts); replaced, never mutated
    _prepared: tuple[dict[str, tuple[int | None, Any, Any]], ...] = ({}, {})

    if TYPE_CHECKING:  # defined by SearchMixin

        def _check_open(self) -> None: ...

    def _text_features(self, texts: list[str]) -> list[tuple[int | None, Any, Any]]:
        """(fingerprint, sketch, band keys) of each text of a verified collection (None: no
        features / no words / not banded).

        Why one pass: in a banded collection the sketch is the bottom ``size`` of the full shingle
        set the band keys are made from, so both come from one :func:`simdb.core.sketch.shingle_sets`
        pass (it was tokenized once for the sketch and again for the keys). Why the memo: ``simdb
        dedup`` asks about a batch, stores its survivors and asks about them again; the second call
        finds their features here instead of tokenizing them a third time (and :meth:`prepare` computes
        them ahead, in another thread). The memo holds the last
        call's texts only (at most FEATURE_MEMO_MAX), and features are a function of the text and
        of the collection's settings, which an open index does not change."""
        known = [self._feature_memo, *self._prepared]
        missing = list(dict.fromkeys(t for t in texts if not any(t in d for d in known)))
        if missing:
            known.insert(0, dict(zip(missing, self.rule.texts_features(self.fingerprinter, missing))))
        out = [next(d[t] for d in known if t in d) for t in texts]
        self._feature_memo = dict(zip(texts, out)) if len(texts) <= FEATURE_MEMO_MAX else {}
        return out

    def prepare(self, texts: Iterable[str]) -> None:
        """Compute now, in the caller's thread, the features of texts that a coming ``near_many``,
        ``near_within`` or ``add_many`` of this verified collection will be given, so that the call
        finds them ready (a Hamming collection has nothing to prepare). Why: ``simdb dedup``
        prepares its next batch in a helper thread while the server answers the current one (the
        driver releases the GIL while it waits), so the client's tokenizing and the server's
        look-ups overlap. Holds the last two calls' texts (at most FEATURE_MEMO_MAX each); a text
        that fails the checks is left for the call that will name it."""
        self._check_open()
        if self.rule.verifier is None:
            return
        ok = []
        for text in dict.fromkeys(_validate.check_queries(texts, "texts")):
            try:
                ok.append(_validate.check_text(text, "text", self.max_text_bytes))
            except (TypeError, ValueError):
                continue
        fresh = dict(zip(ok, self.rule.texts_features(self.fingerprinter, ok))) if len(ok) <= FEATURE_MEMO_MAX else {}
        self._prepared = (self._prepared[-1], fresh)
