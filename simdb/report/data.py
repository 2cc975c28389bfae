"""The report's data: plain cluster data in, a JSON-ready dict out (no database,
no HTML). Word diffs are computed here, so the page's script only displays them."""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from simdb.report.diff import EQUAL, RESPACED, word_diff

__all__ = [
    "ReportItem",
    "ReportCluster",
    "ReportResult",
    "attribute",
    "build_report_data",
    "clean_text",
    "json_for_script",
]


# --------------------------------------------------------------------------- data


@dataclass
class ReportItem:
    """One text in a cluster: its key, and what is known about it."""

    key: str
    text: str | None = None
    distance: int | None = None  # Hamming distance to the cluster's representative
    jaccard: float | None = None  # Jaccard similarity to the representative, if known
    fp: int | None = None  # unsigned 64-bit fingerprint, if known
    why: str | None = None  # why there is no text (shown as "text not available: ..."), if known


@dataclass
class ReportCluster:
    """A cluster: the representative and the other members (not including it)."""

    representative: ReportItem
    members: list[ReportItem] = field(default_factory=list)

    @property
    def size(self) -> int:
        return 1 + len(self.members)


@dataclass(frozen=True)
class ReportResult:
    """What ``write_report`` wrote."""

    path: str
    clusters: int
    texts_in_clusters: int
    total_texts: int | None
    bytes: int
    texts_shown: int = 0  # texts in clusters that the page shows (the rest say why not)


def json_for_script(value: Any) -> str:
    """JSON safe to embed in a ``<script type="application/json">`` element:
    ``<``, ``>`` and ``&`` (and U+2028/U+2029) are written as ``\\uXXXX``
    escapes, so no string can close the element or open a comment."""
    s = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return (
        s.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# --------------------------------------------------------------------------- input coercion


def attribute(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_item(obj: Any) -> ReportItem:
    if isinstance(obj, ReportItem):
        return obj
    if isinstance(obj, str):
        return ReportItem(key=clean_text(obj))
    key = attribute(obj, "key")
    if key is None:
        raise ValueError(f"cluster item has no key: {obj!r}")
    return ReportItem(
        key=clean_text(str(key)),
        text=attribute(obj, "text"),
        distance=attribute(obj, "distance"),
        jaccard=attribute(obj, "jaccard"),
        fp=attribute(obj, "fp"),
        why=attribute(obj, "why"),
    )


def _as_cluster(obj: Any) -> ReportCluster:
    """Accept a ReportCluster, a mapping or any object with ``representative``
    and ``members`` or ``keys`` (which may or may not include the representative; items
    may be keys or objects/mappings with ``key``, ``distance``, ``jaccard``,
    ``text``, ``fp``). A ``distances`` mapping key -> distance is also read."""
    if isinstance(obj, ReportCluster):
        return obj
    rep = _as_item(attribute(obj, "representative"))
    distances = attribute(obj, "distances") or {}
    jaccards = attribute(obj, "jaccards") or {}
    members = []
    members_in = attribute(obj, "members")
    if members_in is None:  # simdb.results.Cluster: representative + keys
        members_in = attribute(obj, "keys")
    for m in members_in or ():
        item = _as_item(m)
        if item.key == rep.key:
            if rep.text is None and item.text is not None:
                rep.text = item.text
            continue
        if item.distance is None and isinstance(distances, Mapping):
            item.distance = distances.get(item.key)
        if item.jaccard is None and isinstance(jaccards, Mapping):
            item.jaccard = jaccards.get(item.key)
        members.append(item)
    return ReportCluster(representative=rep, members=members)


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """Lone surrogates (e.g. bytes decoded with ``surrogateescape``) cannot be written
    as UTF-8: show them as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _cut(text: str | None, limit: int) -> tuple[str | None, str | None, int | None]:
    """(The whole text, cleaned; what the page holds of it, at most ``limit`` characters; its length when cut.)"""
    if text is None:
        return None, None, None
    full = clean_text(str(text))
    return (full, full[:limit], len(full)) if len(full) > limit else (full, full, None)


def _member_row(
    m: ReportItem, omit: bool, rtext: str | None, rfull: str | None, limit: int, fold: bool
) -> dict[str, Any]:
    """A member's row of the page's data: its text as a diff against the representative's ``rtext``
    (cut at ``limit``; ``rfull`` uncut), or as is, or left out (``omit``), or flagged identical / the
    same to the rule.

    Why the full texts decide the flags: two long texts can agree on their first ``limit``
    characters and differ after them; flagged from the cut texts, the page would call them
    "identical text" (or the same to the rule) when they are not."""
    mfull, mtext, mcut = _cut(m.text, limit)
    row: dict[str, Any] = {"k": clean_text(str(m.key)), "d": m.distance}
    if m.jaccard is not None:
        row["j"] = round(float(m.jaccard), 4)
    if omit:
        row["t"] = None
        row["omit"] = 1
        mcut = None
    elif mfull is not None and mfull == rfull:
        row["same"] = 1
    elif mtext is not None and rtext is not None:
        row["s"] = word_diff(rtext, mtext, fold=fold)
        whole = mcut is None and rtext == rfull  # a diff of cut texts says nothing of their tails
        if fold and whole and all(seg[0] in (EQUAL, RESPACED) for seg in row["s"]):
            row["rule_same"] = 1
    else:
        row["t"] = mtext
        if mtext is None and m.why:
            row["why"] = m.why
    if mcut:
        row["cut"] = mcut
    return row


def build_report_data(
    clusters: Iterable[Any],
    *,
    title: str = "simdb near-duplicate report",
    collection: str | None = None,
    k: int | None = None,
    min_jaccard: float | None = None,
    rule: str | None = None,
    total_texts: int | None = None,
    max_text_chars: int = 20_000,
    max_member_texts: int = 1_000,
    generated_at: str | None = None,
    keys_filter: str | None = None,
    fold: bool = False,
) -> dict[str, Any]:
    """The report's data as a JSON-ready dict (no database needed).

    ``clusters`` is an iterable of ``ReportCluster`` or anything with
    ``representative`` and ``members`` (see ``_as_cluster``); texts that are
    ``None`` are shown as "text not available". ``rule``: how the clusters were found, for the
    header (e.g. "Jaccard ≥ 0.8 (chr4-fmix64-v4)"); without it the header shows ``k`` / ``min_jaccard``. Clusters are sorted by size
    (largest first, then by representative key); members by distance, then key.
    Texts longer than ``max_text_chars`` are cut; a member identical to the
    representative is flagged rather than diffed; past the first
    ``max_member_texts`` members of a cluster, members are listed without text. ``fold``: diffs
    compare words the way the character and token rules do (case and punctuation ignored:
    :func:`simdb.report.diff.word_diff`), and a member that differs from the representative only
    so is flagged ``"rule_same"``. A missing text's reason (``ReportItem.why``) goes in ``"why"``.
    """
    out = []
    for raw in clusters:
        c = _as_cluster(raw)
        rep = c.representative
        rfull, rtext, rcut = _cut(rep.text, max_text_chars)
        members = sorted(
            c.members,
            key=lambda m: (m.distance if m.distance is not None else 1 << 30, m.key),
        )
        mrows = [_member_row(m, i >= max_member_texts, rtext, rfull, max_text_chars, fold) for i, m in enumerate(members)]
        entry: dict[str, Any] = {"n": c.size, "r": {"k": clean_text(str(rep.key)), "t": rtext}, "m": mrows}
        if rcut:
            entry["r"]["cut"] = rcut
        if rtext is None and rep.why:
            entry["r"]["why"] = rep.why
        out.append(entry)
    out.sort(key=lambda e: (-e["n"], e["r"]["k"]))
    if generated_at is None:
        generated_at = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return {
        "title": title,
        "collection": collection,
        "k": k,
        "min_jaccard": min_jaccard,
        "rule": rule,
        "total_texts": total_texts,
        "generated_at": generated_at,
        "keys_filter": keys_filter,
        "max_text_chars": max_text_chars,
        "clusters": out,
    }
