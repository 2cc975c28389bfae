"""The report's HTML page: one self-contained file, its CSS and script inline
(read once from ``report.css`` / ``report.js``, package data beside this module),
pinned by a Content-Security-Policy hash so that only this script can run."""

from __future__ import annotations

import base64
import hashlib
import html
from collections import Counter
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from simdb.report.data import build_report_data, json_for_script
from simdb.report.diff import DELETED, RESPACED

__all__ = ["render_html", "render_report", "static_clusters", "summary", "PAGE_SCRIPT", "PAGE_STYLE"]

#: The page style and script, package data. The script reaches the DOM only through
#: textContent / createTextNode / attribute-free elements: there is no innerHTML in it.
PAGE_STYLE = resources.files("simdb.report").joinpath("report.css").read_text(encoding="utf-8")
PAGE_SCRIPT = resources.files("simdb.report").joinpath("report.js").read_text(encoding="utf-8")

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


def summary(data: Mapping[str, Any]) -> dict[str, Any]:
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


_DOT = " \u00b7 "


def chains_note(data: Mapping[str, Any]) -> str:
    """The line under the header: a cluster is a connected component of the near-duplicate pairs, so
    a member's figures to the representative may be outside the rule (Jaccard 0.72 under "Jaccard >= 0.8")."""
    rule = str(data.get("rule") or "")
    if rule.startswith("Hamming") or (not rule and data.get("min_jaccard") is None and data.get("k") is not None):
        k = "k" if data.get("k") is None else data["k"]
        outside = f"more than {k} bits from the representative and within {k} of another member"
    else:
        outside = "at a Jaccard below the threshold to the representative and above it to another member"
    return f"Clusters are chains of near-duplicate pairs: a member may be {outside}."


def _member_text(m: Mapping[str, Any], rtext: str | None) -> str | None:
    """A member's text as the page's data holds it: as is, or rebuilt from its diff to the representative
    (the member's side: what is equal, inserted, and its own spacing), or the representative's (identical)."""
    if m.get("same"):
        return rtext
    if "s" in m:
        return "".join(g[2] if g[0] == RESPACED else g[1] for g in m["s"] if g[0] != DELETED)
    return m.get("t")


def _static_text(text: str | None, item: Mapping[str, Any], note: str = "") -> str:
    esc = html.escape
    if item.get("omit"):
        return '<p class="na">(text not shown: past the first members of this cluster)</p>'
    if text is None:
        why = item.get("why")
        return f'<p class="na">text not available{": " + esc(str(why)) if why else ""}</p>'
    cut = f' <span class="na">(cut: {int(item["cut"]):,} more characters)</span>' if item.get("cut") else ""
    return f'<pre class="static-text">{esc(text)}</pre>{esc(note)}{cut}'


def static_clusters(data: Mapping[str, Any]) -> str:
    """Every cluster and its texts as plain HTML, in the page's order: what a reader without JavaScript
    sees (a text viewer, a mail client's preview, a browser with scripts off), inside ``<noscript>`` (a
    browser that runs the script does not build it: the script shows one page of clusters at a time)."""
    esc = html.escape
    parts = []
    for i, c in enumerate(data["clusters"]):
        r = c["r"]
        parts.append(f'<section class="cluster"><h2><span class="num">#{i + 1:,}</span> '
                     f'<span class="badge">{c["n"]:,} texts</span> representative '
                     f'<span class="key rep">{esc(r["k"])}</span></h2>')
        parts.append(_static_text(r.get("t"), r))
        for m in c["m"]:
            figures = [] if m.get("d") is None else [f"distance {m['d']}"]
            if m.get("j") is not None:
                figures.append(f"Jaccard {m['j']:.3f}")
            note = "identical text" if m.get("same") else ("the same to the rule" if m.get("rule_same") else "")
            parts.append(f'<div class="member"><h3><span class="key">{esc(m["k"])}</span> '
                         f'<span class="na">{esc(", ".join(figures))}</span></h3>')
            parts.append(_static_text(_member_text(m, r.get("t")), m, f" ({note})" if note else ""))
            parts.append("</div>")
        if not c["m"]:
            parts.append('<p class="na">(no other members)</p>')
        parts.append("</section>")
    return "".join(parts) or '<p class="na">No clusters.</p>'


_JS_HASH = base64.b64encode(hashlib.sha256(PAGE_SCRIPT.encode("utf-8")).digest()).decode("ascii")


def render_html(data: Mapping[str, Any]) -> str:
    """The complete HTML page for report ``data`` (from ``build_report_data``)."""
    esc = html.escape
    s = summary(data)
    title = data.get("title") or "simdb near-duplicate report"
    sub = []
    if data.get("collection") is not None:
        sub.append(f"collection {data['collection']}")
    if data.get("rule"):
        sub.append(str(data["rule"]))
    else:
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

    return "".join(
        [
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
            '<meta name="viewport" content="width=device-width,initial-scale=1">',
            # No network: every fetch is forbidden. The only script allowed to run is this
            # page's own (by its hash), so even a text that escaped into markup could not run.
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
            f"style-src 'unsafe-inline'; script-src 'sha256-{_JS_HASH}'; img-src data:\">",
            f"<title>{esc(title)}</title><style>{PAGE_STYLE}</style></head><body>",
            f'<header><h1>{esc(title)}</h1><div class="sub">{esc(_DOT.join(sub))}</div>',
            f'<div class="sub" id="chains">{esc(chains_note(data))}</div></header>',
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
            # without scripts (a browser with them off, a mail client, a text viewer) every cluster as plain
            # HTML; with them, a noscript's content is not even parsed: the script renders one page at a time
            '<noscript><p>Without JavaScript: every cluster, in full, without paging, filtering or word '
            f"diffs.</p><div id=\"static-clusters\">{static_clusters(data)}</div></noscript>",
            '<main id="clusters"></main>',
            '<div class="pager"><button type="button" id="prev2">\u2190 Previous</button>'
            '<span id="pageinfo2"></span><button type="button" id="next2">Next \u2192</button></div>',
            f'<script type="application/json" id="simdb-data">{json_for_script(dict(data))}</script>',
            f"<script>{PAGE_SCRIPT}</script>",
            "</body></html>\n",
        ]
    )


def render_report(clusters: Iterable[Any], **options: Any) -> str:
    """``render_html(build_report_data(clusters, **options))``: the HTML page for
    plain cluster data, no database needed."""
    return render_html(build_report_data(clusters, **options))
