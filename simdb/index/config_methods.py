"""Following a collection's configuration: the version every write carries, and what the index does
when a write is refused because the rule changed since it read it.

Why a mixin of its own: ``simdb convert`` (in this process or another) changes a collection's rule,
and a write computed under the old one would store a row the new rule cannot find. The store refuses
such a write (:mod:`simdb.store.collection_guard`); this is where :class:`simdb.index.SimhashIndex`
reads the new configuration and follows it (fingerprinter, rule, kept texts: :meth:`ConfigMixin._follow_config`);
each writer then computes its row again and writes once more (``add``, ``update``, ``add_if_unique``,
``reserve``: a ``try``/``except CollectionChangedError`` of its own, no callback; ``add_many``: its next try).
Like the facade, it holds no SQL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from simdb.core.fingerprint import Fingerprinter
from simdb.core.kept_texts import keeps_texts
from simdb.errors import CollectionChangedError
from simdb.index import rules as _rules
from simdb.index.search_methods import SearchMixin
from simdb.store import collection_guard as _guard

__all__ = ["ConfigMixin"]

_T = TypeVar("_T")


class ConfigMixin(SearchMixin):
    """The configuration a :class:`simdb.index.SimhashIndex` writes by, and following it when it changes."""

    config: Any
    #: the version of ``config`` (:func:`simdb.store.collection_guard.current`) that every write carries
    config_version: str
    store_texts: bool
    #: set when a change of this collection's rule is announced (simdb.store.collection_guard.listen)
    _rule_changed: threading.Event

    def _current_config(self, conn: Any, cid: int) -> tuple[Any, str]:
        """(config, version) of the collection as stored now; CollectionChangedError if it is gone."""
        now = _guard.current(conn, cid)
        if now is None:
            raise CollectionChangedError(
                f"collection {self.collection!r} was dropped after this index opened it: open it again "
                "(a new SimhashIndex) to create it anew")
        return now

    def _on_rule_change(self, collection_id: int) -> None:
        """A collection's rule changed (announced on any of this index's connections): ours?"""
        if collection_id == getattr(self, "collection_id", None):
            self._rule_changed.set()

    def _at_current_rule(self) -> None:
        """Follow a change of rule announced since this index last read its configuration."""
        if self._rule_changed.is_set():
            self._follow_config()

    def _by_current_rule(self, read: Callable[[], _T]) -> _T:
        """``read()`` by the collection's current rule: a change announced before it is followed
        first; one announced while its statements ran (the announcement arrives with the next
        statement's result, before it is returned) means they may have seen the new rows with the
        old rule, so it is followed and ``read()`` asked again."""
        self._at_current_rule()
        out = read()
        if self._rule_changed.is_set():
            self._follow_config()
            out = read()
        return out

    def _follow_config(self) -> None:
        """Read the collection's configuration again and follow it: after a write was refused because
        the rule changed since this index read it (``simdb convert`` in another process, or texts kept
        from now on), and after this index converted the collection itself."""
        self._rule_changed.clear()  # before reading: a change announced from now on is seen again
        try:
            config, version = self._current_config(self.connection(), self.collection_id)
        except CollectionChangedError:
            self._rule_changed.set()  # dropped: gone for good, and every later call says so
            raise
        self._adopt(config)
        self.config_version = version

    def _adopt(self, config: dict) -> None:
        """Take a rewritten config (``convert_to_verified``): its fingerprinter and rule."""
        self.config = config
        self.store_texts = keeps_texts(config)
        self.fingerprinter = Fingerprinter.from_dict(config["fingerprinter"])
        self.rule = _rules.open_rule(self.collection, config)
        self._feature_memo = {}  # features of the old settings: near_many's memo must not outlive them
        self._prepared = ({}, {})
        self.refresh_stats()
