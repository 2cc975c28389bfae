"""An HTML review report of near-duplicate clusters (issue 10).

``write_report(index, path, k=3)`` writes **one self-contained HTML file**: CSS
and JavaScript are inline, nothing is fetched from the network, and it works
from a ``file://`` URL. It shows every cluster of near-duplicates (largest
first) with its representative and members, each member's Hamming distance to
the representative (and its Jaccard similarity where the collection stores
shingle sets), and the two texts side by side with the changed words marked.

How the pieces fit:

* ``build_report_data(clusters, ...)`` turns plain cluster data into the
  report's JSON-ready dict (word diffs are computed here, in Python, with
  ``difflib`` on word tokens). ``render_html(data)`` turns that into the HTML
  page. ``render_report(clusters, ...)`` does both. None of these needs a
  database, so the rendering is testable on its own.
* ``write_report(index, path, ...)`` gets the clusters from a
  ``SimhashIndex`` (``index.clusters(k=...)``, as ``simdb dups`` does), looks
  up the texts, and writes the file atomically.

Where the texts come from. The store keeps fingerprints, not texts, so the
report looks each key's text up in this order (first hit wins):

1. ``texts=``: a mapping ``key -> text`` or a callable ``key -> text | None``
   supplied by the caller;
2. the row's ``meta`` JSON: ``meta["text"]`` if it is a string (this is what
   ``simdb add --store-text`` stores);
3. only if the caller names a directory, ``texts_from=DIR`` (``simdb report
   --texts-from DIR``): the regular file the key names *inside* DIR (a path
   relative to DIR, or absolute under it; ``simdb add PATH`` uses file paths as
   keys), read as UTF-8 with replacement characters, at most ``max_text_chars``
   characters. A key is never taken as a path otherwise: keys are data, and a
   record ``{"id": "/etc/passwd"}`` must not put that file into the page
   (:mod:`simdb.confined_files`: ``..``, symlinks out of DIR and non-regular
   files are refused).

A key with no text is still listed (key, distance, Jaccard), marked "text not
available".

Safety: every text and key reaches the page as data. The JSON is embedded in a
``<script type="application/json">`` element with ``<``, ``>`` and ``&``
written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (so no text can close the
element), and the page's JavaScript builds the DOM with ``textContent`` and
``createElement`` only — never ``innerHTML`` with data. A text that contains
``<script>`` shows up as those characters and never runs.

Scale: the page renders one page of clusters at a time (50 by default) from
the embedded JSON, and filters in memory, so 10,000 clusters open in about a
second. Long texts are cut at 600 characters with a "show full text" control;
texts longer than ``max_text_chars`` (default 20,000) are cut in the file
itself and say so.
"""

from __future__ import annotations

import base64
import datetime as _dt
import hashlib
import difflib
import functools
import html
import json
import os
import re
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from simdb.confined_files import check_directory, read_confined
from simdb.errors import InvalidArgumentError

__all__ = [
    "ReportItem",
    "ReportCluster",
    "ReportResult",
    "EQUAL",
    "DELETED",
    "INSERTED",
    "RESPACED",
    "tokenize_for_diff",
    "word_diff",
    "json_for_script",
    "build_report_data",
    "render_html",
    "render_report",
    "write_report",
]

EQUAL, DELETED, INSERTED, RESPACED = 0, 1, 2, 3
_WS_RUN = re.compile(r"\s+")

# Han, kana, Hangul: each character is its own token (words are not space separated).
_CJK = (
    "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0002fa1f"
)
_TOKEN = re.compile(rf"\s*(?:[{_CJK}]|[^\W{_CJK}]+|[^\w\s])|\s+")

#: Above this many tokens on either side, the diff runs on lines instead of words.
MAX_DIFF_TOKENS = 30_000


# --------------------------------------------------------------------------- data


@dataclass
class ReportItem:
    """One text in a cluster: its key, and what is known about it."""

    key: str
    text: str | None = None
    distance: int | None = None  # Hamming distance to the cluster's representative
    jaccard: float | None = None  # Jaccard similarity to the representative, if known
    fp: int | None = None  # unsigned 64-bit fingerprint, if known


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


# --------------------------------------------------------------------------- diff


def tokenize_for_diff(text: str) -> list[str]:
    """Split ``text`` into diff tokens: each word, single CJK character or single
    punctuation character together with the whitespace before it (trailing
    whitespace is a token of its own). ``"".join(tokens) == text``.

    Keeping whitespace attached to the next word (rather than as tokens of its
    own) keeps ``difflib`` fast: a lone " " token would match everywhere."""
    return _TOKEN.findall(text)


def _merge(segments: list[list]) -> list[list]:
    out: list[list] = []
    for seg in segments:
        if not seg[1] and (seg[0] != RESPACED or not seg[2]):
            continue
        if out and out[-1][0] == seg[0]:
            out[-1][1] += seg[1]
            if seg[0] == RESPACED:
                out[-1][2] += seg[2]
        else:
            out.append(list(seg))
    return out


def _hoist_space(segments: list[list]) -> list[list]:
    """In a replacement (deleted run then inserted run) that both start with
    whitespace, move that whitespace out in front of them (EQUAL, or RESPACED if
    it differs), so the marks cover words, not the space before them."""
    out: list[list] = []
    i = 0
    while i < len(segments):
        seg = segments[i]
        if seg[0] == DELETED and i + 1 < len(segments) and segments[i + 1][0] == INSERTED:
            text, ins = seg[1], segments[i + 1][1]
            wa = len(text) - len(text.lstrip())
            wb = len(ins) - len(ins.lstrip())
            if 0 < wa < len(text) and 0 < wb < len(ins):
                if text[:wa] == ins[:wb]:
                    out.append([EQUAL, text[:wa]])
                else:
                    out.append([RESPACED, text[:wa], ins[:wb]])
                out.append([DELETED, text[wa:]])
                out.append([INSERTED, ins[wb:]])
                i += 2
                continue
        out.append(seg)
        i += 1
    return _merge(out)


def _key(token: str) -> str:
    """What the diff compares: the token with its whitespace reduced to one space, so a
    re-wrapped or re-indented text does not show every line's first word as changed."""
    c = token[0]
    if not c.isspace() or (c == " " and len(token) > 1 and not token[1].isspace()):
        return token  # the common cases: no whitespace, or exactly one space before a word
    return _WS_RUN.sub(" ", token)


@functools.lru_cache(maxsize=8)  # a representative is diffed against each of its members in turn
def _tokens_and_keys(text: str) -> tuple[list[str], list[str]]:
    tokens = _TOKEN.findall(text)
    # Whitespace runs are whole inside tokens, so the tokens of the text with every
    # run reduced to one space are exactly the keys of the tokens, in order.
    keys = _TOKEN.findall(_WS_RUN.sub(" ", text))
    if len(keys) != len(tokens):  # cannot happen; stay correct if it ever did
        keys = [_key(t) for t in tokens]
    return tokens, keys


def _same_words(ta: list[str], tb: list[str], segments: list[list]) -> None:
    """Append a run of tokens that compare equal: identical ones as EQUAL, ones that
    differ only in whitespace as RESPACED (shown unmarked, each side its own spacing)."""
    if ta == tb:  # the usual case, compared at C speed
        segments.append([EQUAL, "".join(ta)])
        return
    for x, y in zip(ta, tb):
        segments.append([EQUAL, x] if x == y else [RESPACED, x, y])


def word_diff(a: str, b: str) -> list[list]:
    """Word-level diff of ``a`` (the representative) against ``b`` (a member),
    computed with ``difflib.SequenceMatcher`` on word tokens.

    Returns segments, adjacent ones of the same kind merged:

    * ``[0, text]``: in both (EQUAL);
    * ``[1, text]``: only in ``a`` (DELETED);
    * ``[2, text]``: only in ``b`` (INSERTED);
    * ``[3, text_a, text_b]``: the same words with different whitespace (RESPACED,
      e.g. re-wrapped lines); not marked as a change.

    Joining the ``a`` sides (0, 1, and 3's ``text_a``) gives ``a`` exactly; the
    ``b`` sides (0, 2, and 3's ``text_b``) give ``b``.
    """
    if a == b:
        return [[EQUAL, a]] if a else []
    (ta, ka), (tb, kb) = _tokens_and_keys(a), _tokens_and_keys(b)
    if len(ta) > MAX_DIFF_TOKENS or len(tb) > MAX_DIFF_TOKENS:
        ta, tb = a.splitlines(keepends=True), b.splitlines(keepends=True)
        ka, kb = [_key(t) for t in ta], [_key(t) for t in tb]
    # the common prefix and suffix are cheap to strip and are most of a near-duplicate
    p = 0
    limit = min(len(ka), len(kb))
    while p < limit and ka[p] == kb[p]:
        p += 1
    q = 0
    while q < limit - p and ka[len(ka) - 1 - q] == kb[len(kb) - 1 - q]:
        q += 1
    segments: list[list] = []
    _same_words(ta[:p], tb[:p], segments)
    ea, eb = len(ta) - q, len(tb) - q
    sm = difflib.SequenceMatcher(None, ka[p:ea], kb[p:eb], autojunk=eb - p > 2000)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        i1, i2, j1, j2 = i1 + p, i2 + p, j1 + p, j2 + p
        if op == "equal":
            _same_words(ta[i1:i2], tb[j1:j2], segments)
        else:
            if i2 > i1:
                segments.append([DELETED, "".join(ta[i1:i2])])
            if j2 > j1:
                segments.append([INSERTED, "".join(tb[j1:j2])])
    _same_words(ta[ea:], tb[eb:], segments)
    return _hoist_space(_merge(segments))


# --------------------------------------------------------------------------- JSON


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


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _as_item(obj: Any) -> ReportItem:
    if isinstance(obj, ReportItem):
        return obj
    if isinstance(obj, str):
        return ReportItem(key=_clean(obj))
    key = _get(obj, "key")
    if key is None:
        raise ValueError(f"cluster item has no key: {obj!r}")
    return ReportItem(
        key=_clean(str(key)),
        text=_get(obj, "text"),
        distance=_get(obj, "distance"),
        jaccard=_get(obj, "jaccard"),
        fp=_get(obj, "fp"),
    )


def _as_cluster(obj: Any) -> ReportCluster:
    """Accept a ReportCluster, a mapping or any object with ``representative``
    and ``members`` or ``keys`` (which may or may not include the representative; items
    may be keys or objects/mappings with ``key``, ``distance``, ``jaccard``,
    ``text``, ``fp``). A ``distances`` mapping key -> distance is also read."""
    if isinstance(obj, ReportCluster):
        return obj
    rep = _as_item(_get(obj, "representative"))
    distances = _get(obj, "distances") or {}
    jaccards = _get(obj, "jaccards") or {}
    members = []
    members_in = _get(obj, "members")
    if members_in is None:  # simdb.dedup.Cluster: representative + keys
        members_in = _get(obj, "keys")
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


# --------------------------------------------------------------------------- summary SVG


def _svg_bars(
    title: str,
    labels: list[str],
    values: list[int],
    *,
    width: int = 270,
    height: int = 130,
    color: str = "#4a7bd0",
    element_id: str = "",
) -> str:
    """A small bar chart as inline SVG (static; only numbers and escaped labels)."""
    esc = html.escape
    pad_l, pad_b, pad_t = 8, 30, 28
    n = max(1, len(values))
    vmax = max(values) if values else 0
    plot_w = width - 2 * pad_l
    plot_h = height - pad_b - pad_t
    bw = plot_w / n
    parts = [
        f'<svg class="plot" id="{esc(element_id)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{esc(title)}">',
        f'<text x="{width / 2:.1f}" y="13" text-anchor="middle" class="pt">{esc(title)}</text>',
        f'<line x1="{pad_l}" y1="{height - pad_b}" x2="{width - pad_l}" y2="{height - pad_b}" class="axis"/>',
    ]
    step = max(1, (n + 11) // 12)  # at most ~12 x labels
    for i, (label, v) in enumerate(zip(labels, values)):
        h = 0 if vmax == 0 else plot_h * v / vmax
        x = pad_l + i * bw
        y = height - pad_b - h
        parts.append(
            f'<rect x="{x + bw * 0.1:.1f}" y="{y:.1f}" width="{bw * 0.8:.1f}" height="{h:.1f}" '
            f'fill="{color}"><title>{esc(label)}: {v:,}</title></rect>'
        )
        if i % step == 0 or i == n - 1:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{height - pad_b + 12}" text-anchor="middle" class="pl">{esc(label)}</text>'
            )
        if v and n <= 16:
            parts.append(
                f'<text x="{x + bw / 2:.1f}" y="{max(y - 2, pad_t + 8):.1f}" text-anchor="middle" class="pv">{v:,}</text>'
            )
    parts.append("</svg>")
    return "".join(parts)


def _svg_unique(unique: int, representatives: int, duplicates: int, *, width: int = 270, height: int = 130) -> str:
    """A stacked horizontal bar: unique texts / cluster representatives / duplicates."""
    esc = html.escape
    total = unique + representatives + duplicates
    parts = [
        f'<svg class="plot" id="plot-unique" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" aria-label="unique texts">',
        f'<text x="{width / 2:.1f}" y="13" text-anchor="middle" class="pt">Texts: unique vs duplicated</text>',
    ]
    x = 8.0
    bar_w = width - 16
    rows = [
        ("unique (no near-duplicate)", unique, "#3a9d5d"),
        ("cluster representatives", representatives, "#4a7bd0"),
        ("duplicates (would be removed)", duplicates, "#d0644a"),
    ]
    for label, v, color in rows:
        w = 0 if total == 0 else bar_w * v / total
        parts.append(
            f'<rect x="{x:.1f}" y="24" width="{w:.1f}" height="22" fill="{color}">'
            f"<title>{esc(label)}: {v:,}</title></rect>"
        )
        x += w
    for i, (label, v, color) in enumerate(rows):
        y = 64 + i * 18
        pct = 0 if total == 0 else 100 * v / total
        parts.append(f'<rect x="8" y="{y - 9}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="24" y="{y}" class="pl" text-anchor="start">{esc(label)}: {v:,} ({pct:.1f}%)</text>')
    parts.append("</svg>")
    return "".join(parts)


def _size_bins(sizes: Iterable[int]) -> tuple[list[str], list[int]]:
    counts = Counter(sizes)
    if not counts:
        return [], []
    biggest = max(counts)
    if biggest <= 12:
        labels = [str(s) for s in range(2, biggest + 1)]
        return labels, [counts.get(s, 0) for s in range(2, biggest + 1)]
    # exact bins for 2..9, then powers of two
    edges = list(range(2, 10))
    lo = 10
    while lo <= biggest:
        edges.append(lo)
        lo *= 2
    labels, values = [], []
    for i, lo in enumerate(edges):
        hi = edges[i + 1] - 1 if i + 1 < len(edges) else biggest
        labels.append(str(lo) if lo == hi else f"{lo}-{hi}")
        values.append(sum(c for s, c in counts.items() if lo <= s <= hi))
    return labels, values


def _summary(data: Mapping[str, Any]) -> dict[str, Any]:
    clusters = data["clusters"]
    sizes = [c["n"] for c in clusters]
    in_clusters = sum(sizes)
    total = data.get("total_texts")
    dists = Counter(m["d"] for c in clusters for m in c["m"] if m.get("d") is not None)
    k = data.get("k")
    dmax = max([k or 0, *dists]) if dists or k else 0
    unique = None if total is None else max(0, total - in_clusters)
    return {
        "clusters": len(clusters),
        "in_clusters": in_clusters,
        "total": total,
        "unique": unique,
        "duplicates": in_clusters - len(clusters),
        "largest": max(sizes) if sizes else 0,
        "size_bins": _size_bins(sizes),
        "distances": ([str(d) for d in range(dmax + 1)], [dists.get(d, 0) for d in range(dmax + 1)]),
    }


# --------------------------------------------------------------------------- build + render


_SURROGATE = re.compile("[\ud800-\udfff]")


def _clean(text: str) -> str:
    """Lone surrogates (e.g. bytes decoded with ``surrogateescape``) cannot be written
    as UTF-8: show them as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def _cut(text: str | None, limit: int) -> tuple[str | None, int | None]:
    if text is None:
        return None, None
    text = _clean(str(text))
    if len(text) > limit:
        return text[:limit], len(text)
    return text, None


def build_report_data(
    clusters: Iterable[Any],
    *,
    title: str = "simdb near-duplicate report",
    collection: str | None = None,
    k: int | None = None,
    min_jaccard: float | None = None,
    total_texts: int | None = None,
    max_text_chars: int = 20_000,
    max_member_texts: int = 1_000,
    generated_at: str | None = None,
    keys_filter: str | None = None,
) -> dict[str, Any]:
    """The report's data as a JSON-ready dict (no database needed).

    ``clusters`` is an iterable of ``ReportCluster`` or anything with
    ``representative`` and ``members`` (see ``_as_cluster``); texts that are
    ``None`` are shown as "text not available". Clusters are sorted by size
    (largest first, then by representative key); members by distance, then key.
    Texts longer than ``max_text_chars`` are cut; a member identical to the
    representative is flagged rather than diffed; past the first
    ``max_member_texts`` members of a cluster, members are listed without text.
    """
    out = []
    for raw in clusters:
        c = _as_cluster(raw)
        rep = c.representative
        rtext, rcut = _cut(rep.text, max_text_chars)
        members = sorted(
            c.members,
            key=lambda m: (m.distance if m.distance is not None else 1 << 30, m.key),
        )
        mrows = []
        for i, m in enumerate(members):
            mtext, mcut = _cut(m.text, max_text_chars)
            row: dict[str, Any] = {"k": _clean(str(m.key)), "d": m.distance}
            if m.jaccard is not None:
                row["j"] = round(float(m.jaccard), 4)
            if i >= max_member_texts:
                row["t"] = None
                row["omit"] = 1
                mcut = None
            elif mtext is not None and mtext == rtext:
                row["same"] = 1
            elif mtext is not None and rtext is not None:
                row["s"] = word_diff(rtext, mtext)
            else:
                row["t"] = mtext
            if mcut:
                row["cut"] = mcut
            mrows.append(row)
        entry: dict[str, Any] = {"n": c.size, "r": {"k": _clean(str(rep.key)), "t": rtext}, "m": mrows}
        if rcut:
            entry["r"]["cut"] = rcut
        out.append(entry)
    out.sort(key=lambda e: (-e["n"], e["r"]["k"]))
    if generated_at is None:
        generated_at = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return {
        "title": title,
        "collection": collection,
        "k": k,
        "min_jaccard": min_jaccard,
        "total_texts": total_texts,
        "generated_at": generated_at,
        "keys_filter": keys_filter,
        "max_text_chars": max_text_chars,
        "clusters": out,
    }


_CSS = r"""
:root{--fg:#1d2330;--bg:#fff;--muted:#667;--line:#dde1e8;--card:#f7f8fb;--del:#ffd7d5;--delfg:#86181d;
--ins:#cdf3d3;--insfg:#165c26;--acc:#2f5fb3}
@media (prefers-color-scheme:dark){:root{--fg:#e3e6ec;--bg:#15181e;--muted:#9aa3b2;--line:#2d333d;--card:#1c2028;
--del:#5c2226;--delfg:#ffd7d5;--ins:#1f4a2a;--insfg:#cdf3d3;--acc:#8fb3ff}}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Noto Sans","DejaVu Sans",sans-serif;
color:var(--fg);background:var(--bg)}
header{padding:16px 24px 8px;border-bottom:1px solid var(--line)}
h1{font-size:20px;margin:0 0 4px}
.sub{color:var(--muted);font-size:13px}
.summary{display:flex;flex-wrap:wrap;gap:16px;padding:12px 24px;border-bottom:1px solid var(--line)}
.stats{min-width:220px}
.stats table{border-collapse:collapse}
.stats td{padding:2px 10px 2px 0}
.stats td.n{text-align:right;font-variant-numeric:tabular-nums;font-weight:600}
svg.plot{background:var(--card);border:1px solid var(--line);border-radius:6px}
svg.plot text{fill:var(--fg);font-size:10px;font-family:inherit}
svg.plot .pt{font-size:11px;font-weight:600}
svg.plot .axis{stroke:var(--muted);stroke-width:1}
.controls{position:sticky;top:0;z-index:2;display:flex;flex-wrap:wrap;gap:8px;align-items:center;padding:10px 24px;
background:var(--bg);border-bottom:1px solid var(--line)}
#filter{flex:1 1 280px;max-width:520px;padding:6px 10px;font:inherit;border:1px solid var(--line);border-radius:6px;
background:var(--bg);color:var(--fg)}
button,select{font:inherit;padding:4px 10px;border:1px solid var(--line);border-radius:6px;background:var(--card);
color:var(--fg);cursor:pointer}
button:disabled{opacity:.45;cursor:default}
#status{color:var(--muted)}
main{padding:8px 24px 40px}
.cluster{border:1px solid var(--line);border-radius:8px;margin:14px 0;background:var(--card);overflow:hidden}
.cluster>h2{font-size:14px;margin:0;padding:8px 12px;border-bottom:1px solid var(--line);display:flex;gap:12px;
flex-wrap:wrap;align-items:baseline}
.cluster>h2 .num{color:var(--muted);font-weight:400}
.badge{display:inline-block;padding:0 8px;border-radius:10px;background:var(--acc);color:var(--bg);font-size:12px}
.key{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,monospace;font-size:12.5px;word-break:break-all}
.pair{border-top:1px solid var(--line);padding:8px 12px}
.pair:first-of-type{border-top:0}
.pairhead{display:flex;gap:14px;flex-wrap:wrap;font-size:12.5px;color:var(--muted);margin-bottom:6px}
.pairhead .metric b{color:var(--fg);font-variant-numeric:tabular-nums}
.cols{display:grid;grid-template-columns:1fr 1fr;gap:10px}
@media (max-width:760px){.cols{grid-template-columns:1fr}}
.col{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:6px 8px;min-width:0}
.col .label{font-size:11.5px;color:var(--muted);margin-bottom:3px}
.text{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font-size:13px}
del.chg{background:var(--del);color:var(--delfg);text-decoration:line-through;text-decoration-thickness:1px}
ins.chg{background:var(--ins);color:var(--insfg);text-decoration:none}
.na{color:var(--muted);font-style:italic}
.same{display:inline-block;padding:0 8px;border-radius:10px;background:var(--ins);color:var(--insfg)}
.more{margin-top:4px;font-size:12px;padding:1px 8px}
.note{color:var(--muted);font-size:12px}
.pager{display:flex;gap:8px;align-items:center;justify-content:center;padding:6px}
noscript p{padding:12px 24px}
"""

# The page script. Data only ever reaches the DOM through textContent /
# createTextNode / attribute-free elements: there is no innerHTML here.
_JS = r"""
(function(){
"use strict";
var DATA = JSON.parse(document.getElementById("simdb-data").textContent);
var ALL = DATA.clusters;
var TRUNC = 600, CTX = 120, MAXSHOW = 1500, MEMBERS_SHOWN = 20, DATA_LIMIT = DATA.max_text_chars || 20000;
var state = {page: 0, size: 50, list: ALL, query: ""};
var $ = function(id){return document.getElementById(id);};
function el(tag, cls, text){
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function fmt(n){return Number(n).toLocaleString("en-US");}
/* The segments of one side (1 = representative, 2 = member) as [tag, text]:
   tag 3 (same words, other whitespace) becomes unmarked text of that side. */
function sideOf(segs, side){
  var out = [];
  for (var i = 0; i < segs.length; i++){
    var g = segs[i];
    if (g[0] === 0 || g[0] === side) out.push(g);
    else if (g[0] === 3) out.push([0, g[side]]);
  }
  return out;
}
function textOf(segs, side){
  var s = "", mine = sideOf(segs, side);
  for (var i = 0; i < mine.length; i++) s += mine[i][1];
  return s;
}
/* Append the segments of one side (1 = representative, 2 = member) to box,
   marking changed words. Compact mode keeps every change visible but shortens
   long unchanged stretches to CTX characters of context around the changes,
   and stops after about MAXSHOW characters. Returns true when something was elided. */
function elided(n){ return el("span", "na gap", " [\u2026 " + fmt(n) + " characters \u2026] "); }
function renderSegs(box, segs, side, compact){
  var used = 0, cut = false, mine = sideOf(segs, side);
  for (var i = 0; i < mine.length; i++){
    var tag = mine[i][0], t = mine[i][1];
    if (compact && used >= MAXSHOW){
      var rest = 0; for (var j = i; j < mine.length; j++) rest += mine[j][1].length;
      box.appendChild(elided(rest)); return true;
    }
    if (tag === 0){
      if (compact && t.length > 2 * CTX + 40){
        var first = i === 0, last = i === mine.length - 1;
        if (first && last){ box.appendChild(document.createTextNode(t.slice(0, TRUNC)));
          if (t.length > TRUNC){ box.appendChild(elided(t.length - TRUNC)); cut = true; } used += TRUNC; continue; }
        if (!first) box.appendChild(document.createTextNode(t.slice(0, CTX)));
        box.appendChild(elided(t.length - (first || last ? CTX : 2 * CTX)));
        if (!last) box.appendChild(document.createTextNode(t.slice(t.length - CTX)));
        used += first || last ? CTX : 2 * CTX; cut = true; continue;
      }
      box.appendChild(document.createTextNode(t));
    } else {
      var m = el(side === 1 ? "del" : "ins", "chg", compact && t.length > TRUNC ? t.slice(0, TRUNC) : t);
      m.title = side === 1 ? "only in the representative" : "only in this member";
      box.appendChild(m);
      if (compact && t.length > TRUNC){ box.appendChild(elided(t.length - TRUNC)); cut = true; }
    }
    used += Math.min(t.length, TRUNC);
  }
  return cut;
}
function renderPlain(box, text, limit){
  if (text === null || text === undefined){ box.appendChild(el("span", "na", "(text not available)")); return false; }
  if (limit && text.length > limit){ box.appendChild(document.createTextNode(text.slice(0, limit)));
    box.appendChild(elided(text.length - limit)); return true; }
  box.appendChild(document.createTextNode(text)); return false;
}
function column(label, key, cutTotal){
  var col = el("div", "col");
  var lab = el("div", "label");
  lab.appendChild(document.createTextNode(label + " "));
  lab.appendChild(el("span", "key", key));
  col.appendChild(lab);
  var pre = el("div", "text");
  col.appendChild(pre);
  if (cutTotal) col.appendChild(el("div", "note", "(cut to " + fmt(DATA_LIMIT) + " of " + fmt(cutTotal) + " characters in this file)"));
  return {col: col, box: pre};
}
function pairView(c, m){
  var pair = el("div", "pair");
  var head = el("div", "pairhead");
  var mk = el("span"); mk.appendChild(document.createTextNode("member ")); mk.appendChild(el("span", "key", m.k));
  head.appendChild(mk);
  if (m.d !== null && m.d !== undefined){
    var d = el("span", "metric dist"); d.appendChild(document.createTextNode("distance "));
    d.appendChild(el("b", null, m.d)); d.appendChild(document.createTextNode(" / 64 \u00b7 similarity "));
    d.appendChild(el("b", null, (1 - m.d / 64).toFixed(3))); head.appendChild(d);
  }
  if (m.j !== undefined && m.j !== null){
    var j = el("span", "metric jac"); j.appendChild(document.createTextNode("Jaccard "));
    j.appendChild(el("b", null, Number(m.j).toFixed(3))); head.appendChild(j);
  }
  pair.appendChild(head);
  if (m.same){
    head.appendChild(el("span", "same", "identical text"));
    return pair;
  }
  if (m.omit){
    pair.appendChild(el("div", "na", "(text left out of this report: only the first members of a large cluster carry their texts)"));
    return pair;
  }
  var cols = el("div", "cols");
  var left = column("representative", c.r.k, c.r.cut), right = column("member", m.k, m.cut);
  cols.appendChild(left.col); cols.appendChild(right.col);
  pair.appendChild(cols);
  function fill(limit){
    left.box.textContent = ""; right.box.textContent = "";
    var a, b;
    if (m.s){ a = renderSegs(left.box, m.s, 1, !!limit); b = renderSegs(right.box, m.s, 2, !!limit); }
    else { a = renderPlain(left.box, c.r.t, limit); b = renderPlain(right.box, m.t, limit); }
    return a || b;
  }
  if (fill(TRUNC)){
    var total = m.s ? Math.max(textOf(m.s, 1).length, textOf(m.s, 2).length)
                    : Math.max((c.r.t || "").length, (m.t || "").length);
    var btn = el("button", "more expand", "Show full text (" + fmt(total) + " characters)");
    btn.type = "button";
    btn.addEventListener("click", function(){
      var full = btn.getAttribute("data-full") === "1";
      fill(full ? TRUNC : 0);
      btn.setAttribute("data-full", full ? "0" : "1");
      btn.textContent = full ? "Show full text (" + fmt(total) + " characters)" : "Show less";
    });
    pair.appendChild(btn);
  }
  return pair;
}
function clusterView(c, index){
  var sec = el("section", "cluster");
  sec.setAttribute("data-rep", c.r.k);
  var h = el("h2");
  h.appendChild(el("span", "num", "#" + fmt(index + 1)));
  h.appendChild(el("span", "badge", fmt(c.n) + " texts"));
  var rk = el("span"); rk.appendChild(document.createTextNode("representative "));
  rk.appendChild(el("span", "key rep", c.r.k)); h.appendChild(rk);
  sec.appendChild(h);
  var body = el("div", "pairs");
  sec.appendChild(body);
  function show(n){
    body.textContent = "";
    for (var i = 0; i < Math.min(n, c.m.length); i++) body.appendChild(pairView(c, c.m[i]));
    if (c.m.length > n){
      var btn = el("button", "more members", "Show all " + fmt(c.m.length) + " members");
      btn.type = "button";
      btn.addEventListener("click", function(){ show(c.m.length); });
      body.appendChild(btn);
    }
  }
  if (!c.m.length) body.appendChild(el("div", "pair na", "(no other members)"));
  else show(MEMBERS_SHOWN);
  return sec;
}
function render(){
  var list = state.list, pages = Math.max(1, Math.ceil(list.length / state.size));
  if (state.page >= pages) state.page = pages - 1;
  if (state.page < 0) state.page = 0;
  var start = state.page * state.size, end = Math.min(list.length, start + state.size);
  var main = $("clusters");
  main.textContent = "";
  var frag = document.createDocumentFragment();
  for (var i = start; i < end; i++) frag.appendChild(clusterView(list[i], list[i]._i));
  main.appendChild(frag);
  if (!list.length) main.appendChild(el("p", "na", state.query ? "No cluster matches the filter." : "No clusters."));
  var msg = list.length ? "Clusters " + fmt(start + 1) + "\u2013" + fmt(end) + " of " + fmt(list.length) : "0 clusters";
  if (state.query) msg += " matching (of " + fmt(ALL.length) + ")";
  $("status").textContent = msg;
  $("status").setAttribute("data-count", String(list.length));
  $("status").setAttribute("data-query", state.query);
  var pl = "page " + fmt(state.page + 1) + " / " + fmt(pages);
  ["pageinfo", "pageinfo2"].forEach(function(id){ $(id).textContent = pl; });
  ["prev", "prev2"].forEach(function(id){ $(id).disabled = state.page === 0; });
  ["next", "next2"].forEach(function(id){ $(id).disabled = state.page >= pages - 1; });
}
for (var i = 0; i < ALL.length; i++) ALL[i]._i = i;
function hay(c){
  if (c._h === undefined){
    var parts = [c.r.k, c.r.t || ""];
    for (var i = 0; i < c.m.length; i++){
      var m = c.m[i]; parts.push(m.k);
      if (!m.same) parts.push(m.s ? textOf(m.s, 2) : (m.t || ""));
    }
    c._h = parts.join("\u0000").toLowerCase();
  }
  return c._h;
}
function applyFilter(){
  var q = $("filter").value.trim().toLowerCase();
  if (q === state.query) return;
  state.query = q;
  if (!q) state.list = ALL;
  else { var words = q.split(/\s+/);
         state.list = ALL.filter(function(c){ var h = hay(c);
           for (var i = 0; i < words.length; i++) if (h.indexOf(words[i]) < 0) return false; return true; }); }
  state.page = 0;
  render();
}
var timer = null;
$("filter").addEventListener("input", function(){ clearTimeout(timer); timer = setTimeout(applyFilter, 120); });
$("filter").addEventListener("keydown", function(e){ if (e.key === "Enter"){ clearTimeout(timer); applyFilter(); } });
["search", "change"].forEach(function(ev){ $("filter").addEventListener(ev, function(){ clearTimeout(timer); applyFilter(); }); });
function go(delta){ state.page += delta; render(); window.scrollTo(0, $("clusters").offsetTop - 60); }
["prev", "prev2"].forEach(function(id){ $(id).addEventListener("click", function(){ go(-1); }); });
["next", "next2"].forEach(function(id){ $(id).addEventListener("click", function(){ go(1); }); });
$("pagesize").addEventListener("change", function(){ state.size = parseInt($("pagesize").value, 10) || 50; state.page = 0; render(); });
render();
document.documentElement.setAttribute("data-ready", "1");
})();
"""


_DOT = " \u00b7 "
_JS_HASH = base64.b64encode(hashlib.sha256(_JS.encode("utf-8")).digest()).decode("ascii")


def render_html(data: Mapping[str, Any]) -> str:
    """The complete HTML page for report ``data`` (from ``build_report_data``)."""
    esc = html.escape
    s = _summary(data)
    title = data.get("title") or "simdb near-duplicate report"
    sub = []
    if data.get("collection") is not None:
        sub.append(f"collection {data['collection']}")
    if data.get("k") is not None:
        sub.append(f"k = {data['k']}")
    if data.get("min_jaccard") is not None:
        sub.append(f"Jaccard \u2265 {data['min_jaccard']}")
    if data.get("keys_filter"):
        sub.append(str(data["keys_filter"]))
    if data.get("generated_at"):
        sub.append(f"generated {data['generated_at']}")

    def row(label: str, value: Any) -> str:
        v = "\u2013" if value is None else f"{value:,}"
        return f'<tr><td>{esc(label)}</td><td class="n">{esc(v)}</td></tr>'

    stats = [
        row("texts in the collection", s["total"]),
        row("clusters", s["clusters"]),
        row("texts in clusters", s["in_clusters"]),
        row("duplicates (beyond one per cluster)", s["duplicates"]),
        row("unique texts (no near-duplicate)", s["unique"]),
        row("largest cluster", s["largest"]),
    ]
    plots = [
        _svg_bars("Cluster sizes (texts per cluster)", *s["size_bins"], element_id="plot-sizes"),
        _svg_bars(
            "Distance to representative (bits)", *s["distances"], color="#8a5cc2", element_id="plot-distances"
        ),
    ]
    if s["total"] is not None:
        plots.append(_svg_unique(s["unique"], s["clusters"], s["duplicates"]))

    pager = (
        '<div class="pager"><button type="button" id="prev{n}">\u2190 Previous</button>'
        '<span id="pageinfo{n}"></span><button type="button" id="next{n}">Next \u2192</button></div>'
    )
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            # No network: every fetch is forbidden. The only script allowed to run is this
            # page's own (by its hash), so even a text that escaped into markup could not run.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            f"style-src 'unsafe-inline'; script-src 'sha256-{_JS_HASH}'; img-src data:\">",
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>",
            f'<header><h1>{esc(title)}</h1><div class="sub">{esc(_DOT.join(sub))}</div></header>',
            '<section class="summary" id="summary"><div class="stats"><table>',
            "".join(stats),
            "</table></div>",
            "".join(plots),
            "</section>",
            '<div class="controls"><input id="filter" type="search" autocomplete="off" '
            'placeholder="Filter clusters by key or text (all words must match)" aria-label="Filter clusters">',
            '<button type="button" id="prev">\u2190</button><span id="pageinfo"></span>'
            '<button type="button" id="next">\u2192</button>',
            '<label>per page <select id="pagesize"><option>20</option><option selected>50</option>'
            "<option>100</option><option>500</option></select></label>",
            '<span id="status" aria-live="polite"></span></div>',
            '<noscript><p>This report renders its clusters with JavaScript; please enable it.</p></noscript>',
            '<main id="clusters"></main>',
            pager.format(n="2"),
            f'<script type="application/json" id="simdb-data">{json_for_script(dict(data))}</script>',
            f"<script>{_JS}</script>",
            "</body></html>\n",
        ]
    )


def render_report(clusters: Iterable[Any], **options: Any) -> str:
    """``render_html(build_report_data(clusters, **options))``: the HTML page for
    plain cluster data, no database needed."""
    return render_html(build_report_data(clusters, **options))


# --------------------------------------------------------------------------- from an index

TextSource = Mapping[str, str] | Callable[[str], "str | None"]


def _lookup_text(
    key: str,
    meta: Any,
    texts: TextSource | None,
    texts_from: Path | None,
    limit: int,
) -> str | None:
    if texts is not None:
        t = texts.get(key) if isinstance(texts, Mapping) else texts(key)
        if t is not None:
            return str(t)
    if isinstance(meta, Mapping) and isinstance(meta.get("text"), str):
        return meta["text"]
    if texts_from is not None:
        return read_confined(texts_from, key, limit)
    return None


def _jaccard(a: Any, b: Any) -> float | None:
    if not a or not b:
        return None
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else None


def _popcount(x: int) -> int:
    return bin(x).count("1")


def _rows_for_keys(index: Any, keys: list[str]) -> dict[str, dict[str, Any]]:
    """key -> {"fp": unsigned int | None, "meta": ..., "shingles": list | None},
    fetched in batches straight from the store (one query per 5,000 keys) when the
    index exposes ``engine`` and ``collection_id`` (``SimhashIndex`` does), else
    through ``index.get(key)`` one key at a time."""
    engine = getattr(index, "engine", None)
    collection_id = getattr(index, "collection_id", None)
    out: dict[str, dict[str, Any]] = {}
    if engine is None or collection_id is None:
        for key in keys:
            m = index.get(key)
            if m is not None:
                fp = _get(m, "fp")
                out[key] = {"fp": None if fp is None else int(fp) & 0xFFFFFFFFFFFFFFFF, "meta": _get(m, "meta"),
                            "shingles": _get(m, "shingles")}
        return out
    import sqlalchemy as sa

    q = sa.text(
        "SELECT key, fp, meta, shingles FROM simdb_fingerprints "
        "WHERE collection_id = :cid AND key = ANY(:keys)"
    )
    with engine.connect() as conn:
        for i in range(0, len(keys), 5000):
            for key, fp, meta, shingles in conn.execute(q, {"cid": int(collection_id), "keys": keys[i : i + 5000]}):
                out[key] = {
                    "fp": None if fp is None else fp & 0xFFFFFFFFFFFFFFFF,
                    "meta": meta,
                    "shingles": shingles,
                }
    return out


def _cluster_parts(c: Any) -> tuple[str, list[Any]]:
    rep = _get(c, "representative")
    rep_key = rep if isinstance(rep, str) else _get(rep, "key")
    members = _get(c, "members")
    if members is None:  # simdb.dedup.Cluster: representative + keys (representative first)
        members = _get(c, "keys")
    return str(rep_key), list(members or ())


def write_report(
    index: Any,
    path: str | os.PathLike[str],
    *,
    k: int = 3,
    min_jaccard: float | None = None,
    keys: Iterable[str] | None = None,
    texts: TextSource | None = None,
    texts_from: str | os.PathLike[str] | None = None,
    read_files: bool | None = None,
    include_singletons: bool = False,
    max_text_chars: int = 20_000,
    max_member_texts: int = 1_000,
    title: str | None = None,
) -> ReportResult:
    """Write an HTML review report of ``index``'s near-duplicate clusters to ``path``.

    ``k`` and ``min_jaccard`` select clusters exactly as ``simdb dups`` does
    (``index.clusters(k=k, min_jaccard=...)``). With ``keys`` (e.g. the keys
    just added), only the clusters containing at least one of them are shown.
    ``texts`` / ``texts_from`` say where texts come from (see the module doc):
    files are read only from inside the directory ``texts_from``, never from a
    path a key names by itself. ``read_files`` is accepted for compatibility:
    ``False`` changes nothing, ``True`` is an error asking for ``texts_from``.
    Returns a ``ReportResult``; the file is written atomically.
    """
    if read_files:
        raise InvalidArgumentError(
            "read_files=True is no longer supported (it read any file a key named, e.g. /etc/passwd): "
            "pass texts_from=DIR to show the files under DIR"
        )
    root = None if texts_from is None else check_directory(texts_from)
    cl_kwargs: dict[str, Any] = {"k": k}
    if min_jaccard is not None:
        cl_kwargs["min_jaccard"] = min_jaccard
    if include_singletons:
        cl_kwargs["include_singletons"] = True
    wanted = None if keys is None else set(map(str, keys))

    raw: list[tuple[str, list[Any]]] = []
    for c in index.clusters(**cl_kwargs):
        rep_key, members = _cluster_parts(c)
        mkeys = [m if isinstance(m, str) else str(_get(m, "key")) for m in members]
        if wanted is not None and rep_key not in wanted and not wanted.intersection(mkeys):
            continue
        raw.append((rep_key, members))

    all_keys = sorted({rep for rep, _ in raw} | {str(_get(m, "key", m)) for _, ms in raw for m in ms})
    rows = _rows_for_keys(index, all_keys) if all_keys else {}

    def item(key: str, given: Any, rep_row: dict[str, Any] | None) -> ReportItem:
        row = rows.get(key, {})
        fp = row.get("fp")
        dist = None
        jac = None
        if rep_row is not None:
            if fp is not None and rep_row.get("fp") is not None:
                dist = _popcount(fp ^ rep_row["fp"])
            elif not isinstance(given, str):
                dist = _get(given, "distance")
            jac = _jaccard(row.get("shingles"), rep_row.get("shingles"))
            if jac is None and not isinstance(given, str):
                jac = _get(given, "jaccard")
        text = _lookup_text(key, row.get("meta"), texts, root, max_text_chars)
        return ReportItem(key=key, text=text, distance=dist, jaccard=jac, fp=fp)

    clusters = []
    for rep_key, members in raw:
        rep_row = rows.get(rep_key, {})
        rep = item(rep_key, rep_key, None)
        ms = []
        for m in members:
            key = m if isinstance(m, str) else str(_get(m, "key"))
            if key == rep_key:
                continue
            ms.append(item(key, m, rep_row))
        clusters.append(ReportCluster(representative=rep, members=ms))

    try:
        total = len(index)
    except TypeError:
        total = None
    name = getattr(index, "collection", None)
    name = getattr(name, "name", name)
    data = build_report_data(
        clusters,
        title=title or (f"simdb near-duplicate report: {name}" if name else "simdb near-duplicate report"),
        collection=None if name is None else str(name),
        k=k,
        min_jaccard=min_jaccard,
        total_texts=total,
        max_text_chars=max_text_chars,
        max_member_texts=max_member_texts,
        keys_filter=None if wanted is None else (
            f"clusters containing any of {len(wanted):,} given key{'' if len(wanted) == 1 else 's'}"
        ),
    )
    page = render_html(data)
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    fd, tmp = tempfile.mkstemp(prefix=".simdb-report-", suffix=".html", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return ReportResult(
        path=target,
        clusters=len(clusters),
        texts_in_clusters=sum(c.size for c in clusters),
        total_texts=total,
        bytes=len(page.encode("utf-8")),
    )
