"""PNG plots for the benchmark results (issue 10). Needs matplotlib, an optional
extra: ``pip install matplotlib``.

The benchmark scripts call one of these at the end, next to the table they
print, with the result rows they already have (lists of dicts); the field
names are looked up under a few usual spellings, so a script need not reshape
its rows:

* ``plot_latency(rows, path)``: query latency vs collection size N, one panel
  per k, one line per method (simdb / sequential scan / HNSW ...), p50 solid and
  p99 dashed, log-log axes.
* ``plot_throughput(rows, path)``: fingerprinting throughput in MB/s, grouped
  bars per corpus (or language / workers), one bar per implementation (simdb
  vs the PyPI ``simhash`` package ...).
* ``plot_f1(rows, path)``: F1 (and, thinner, precision and recall) vs the
  Jaccard threshold, one panel per language, one line per method.
* ``plot_lines`` / ``plot_bars``: the general forms the three above use, for
  any other table (e.g. ``plot_lines(rows, "pairs.png", x="n", y="seconds",
  series="method")``).
* ``beside(__file__, "name.png")`` is ``benchmarks/results/name.png`` for a
  script in ``benchmarks/``; ``record(path, rows, key=...)`` appends rows to a
  JSON-lines file and returns all of them, for benchmarks that measure one N
  per run but plot every N measured so far.

Every function returns the path it wrote, or ``None`` after printing one line
to stderr when matplotlib is not installed (pass ``missing="raise"`` to get an
ImportError instead), so a benchmark never fails for want of a plot. Only the
object-oriented matplotlib API is used (``matplotlib.figure.Figure``), so no
global backend or pyplot state is touched.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "available",
    "beside",
    "record",
    "plot_lines",
    "plot_bars",
    "plot_latency",
    "plot_throughput",
    "plot_f1",
    "search_plot",
    "fingerprint_plot",
    "quality_plot",
    "pairs_plot",
    "shards_plot",
    "spark_pairs_plot",
]

MISSING = "matplotlib is not installed: no plot written (pip install matplotlib)"

# usual spellings of the fields, first match wins
N_KEYS = ("n", "N", "rows", "size", "fingerprints", "collection_size")
K_KEYS = ("k",)
METHOD_KEYS = ("method", "engine", "impl", "implementation", "name", "system", "layout")
P50_KEYS = ("p50_ms", "p50", "median_ms", "latency_ms", "ms", "mean_ms")
P99_KEYS = ("p99_ms", "p99")
MBS_KEYS = ("mb_per_s", "mb_s", "MB/s", "mbps", "throughput_mb_s", "throughput")
GROUP_KEYS = ("corpus", "lang", "language", "workers", "dataset")
THRESHOLD_KEYS = ("threshold", "t", "T", "min_jaccard")
F1_KEYS = ("f1", "F1")
PRECISION_KEYS = ("precision", "p", "P")
RECALL_KEYS = ("recall", "r", "R")

_COLORS = ["#2f5fb3", "#d0644a", "#3a9d5d", "#8a5cc2", "#c9a227", "#4aa3c9", "#b34a8a", "#666666"]


def available() -> bool:
    """Whether matplotlib can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure(panels: int, *, width: float = 5.2, height: float = 3.6, cols: int = 3):
    from matplotlib.figure import Figure

    cols = min(panels, cols)
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(width * cols, height * rows), dpi=110, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[panels:]:
        ax.set_visible(False)
    return fig, flat[:panels]


def _pick(row: Mapping[str, Any], keys: Any, default: Any = None) -> Any:
    """The row's value under the first of ``keys`` present (a name, a list of names,
    or a callable ``row -> value``)."""
    if keys is None:
        return default
    if callable(keys):
        value = keys(row)
        return default if value is None else value
    if isinstance(keys, str):
        keys = (keys,)
    for key in keys:
        if key in row and row[key] is not None:
            return row[key]
    return default


def _rows(rows: Iterable[Any]) -> list[Mapping[str, Any]]:
    out = []
    for r in rows:
        if isinstance(r, Mapping):
            out.append(r)
        elif hasattr(r, "_asdict"):
            out.append(r._asdict())
        elif hasattr(r, "__dict__"):
            out.append(vars(r))
        else:
            raise TypeError(f"rows: expected mappings, got {type(r).__name__}")
    return out


def _missing(missing: str) -> None:
    if missing == "raise":
        raise ImportError(MISSING)
    print(f"benchmarks/plots.py: {MISSING}", file=sys.stderr)


def _save(fig, path: str | os.PathLike[str]) -> str:
    target = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(target, format="png")
    return target


def _order(values: Iterable[Any]) -> list[Any]:
    seen: list[Any] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def beside(script: str | os.PathLike[str], name: str) -> str:
    """``<the script's directory>/results/<name>``: where a benchmark keeps its result
    rows and PNGs (``plots.beside(__file__, "pairs.png")``)."""
    from pathlib import Path

    return str(Path(script).resolve().parent / "results" / name)


def record(
    path: str | os.PathLike[str],
    rows: Iterable[Any],
    *,
    key: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Append ``rows`` to the JSON-lines file ``path`` and return every row it holds,
    so a benchmark run at one N at a time can plot all the Ns measured so far.
    With ``key`` (field names), only the latest row per key value is kept (and the
    file is rewritten that way)."""
    import json

    target = os.fspath(path)
    os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
    new = [dict(r) for r in _rows(rows)]
    old: list[dict[str, Any]] = []
    if os.path.exists(target):
        with open(target, encoding="utf-8") as f:
            old = [json.loads(line) for line in f if line.strip()]
    rows_all = old + new
    if key:
        latest: dict[tuple, dict[str, Any]] = {}
        for r in rows_all:
            latest.pop(tuple(r.get(k) for k in key), None)  # re-insert: keeps the order of the latest
            latest[tuple(r.get(k) for k in key)] = r
        rows_all = list(latest.values())
        with open(target, "w", encoding="utf-8") as f:
            f.writelines(json.dumps(r, default=str) + "\n" for r in rows_all)
    else:
        with open(target, "a", encoding="utf-8") as f:
            f.writelines(json.dumps(r, default=str) + "\n" for r in new)
    return rows_all


def plot_lines(
    rows: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    x: Sequence[str] | str,
    y: Sequence[str] | str,
    series: Sequence[str] | str | None = METHOD_KEYS,
    panel: Sequence[str] | str | None = None,
    y2: Sequence[str] | str | None = None,
    title: str | None = None,
    xlabel: str | None = None,
    ylabel: str | None = None,
    panel_label: str = "{}",
    logx: bool = False,
    logy: bool = False,
    ylim: tuple[float, float] | None = None,
    missing: str = "warn",
) -> str | None:
    """Lines of ``y`` against ``x``: one line per distinct ``series`` value, one panel
    per distinct ``panel`` value. ``y2`` (e.g. p99 next to p50) is drawn dashed in
    the same colour. Field arguments are a name or a list of accepted names."""
    if not available():
        _missing(missing)
        return None
    data = [r for r in _rows(rows) if _pick(r, x) is not None and _pick(r, y) is not None]
    panels = _order(_pick(r, panel, "") for r in data) or [""]
    names = _order(str(_pick(r, series, "")) for r in data)
    color = {name: _COLORS[i % len(_COLORS)] for i, name in enumerate(names)}
    fig, axes = _figure(len(panels))
    for ax, pv in zip(axes, panels):
        for name in names:
            pts = sorted(
                (float(_pick(r, x)), float(_pick(r, y)), _pick(r, y2))
                for r in data
                if str(_pick(r, series, "")) == name and _pick(r, panel, "") == pv
            )
            if not pts:
                continue
            label = name or None
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.8, color=color[name], label=label)
            second = [(p[0], float(p[2])) for p in pts if p[2] is not None]
            if second:
                ax.plot([p[0] for p in second], [p[1] for p in second], ls="--", lw=1.1, color=color[name])
        if logx:
            ax.set_xscale("log")
        if logy:
            ax.set_yscale("log")
        if ylim:
            ax.set_ylim(*ylim)
        ax.set_xlabel(xlabel or (x if isinstance(x, str) else x[0]))
        ax.set_ylabel(ylabel or (y if isinstance(y, str) else y[0]))
        if pv != "":
            ax.set_title(panel_label.format(pv), fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
        if any(n for n in names):
            ax.legend(fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return _save(fig, path)


def plot_bars(
    rows: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    y: Sequence[str] | str,
    group: Sequence[str] | str | None = GROUP_KEYS,
    series: Sequence[str] | str | None = METHOD_KEYS,
    title: str | None = None,
    ylabel: str | None = None,
    logy: bool = False,
    value_format: str = "{:,.1f}",
    missing: str = "warn",
) -> str | None:
    """Grouped bars of ``y``: one group per distinct ``group`` value, one bar (and
    colour) per distinct ``series`` value, each bar labelled with its value."""
    if not available():
        _missing(missing)
        return None
    data = [r for r in _rows(rows) if _pick(r, y) is not None]
    groups = _order(str(_pick(r, group, "")) for r in data) or [""]
    names = _order(str(_pick(r, series, "")) for r in data) or [""]
    fig, (ax,) = _figure(1, width=max(5.2, 1.3 * len(groups) * max(1, len(names)) ** 0.5 + 2))
    width = 0.8 / len(names)
    for si, name in enumerate(names):
        xs, ys = [], []
        for gi, g in enumerate(groups):
            vals = [float(_pick(r, y)) for r in data if str(_pick(r, group, "")) == g and str(_pick(r, series, "")) == name]
            if vals:
                xs.append(gi - 0.4 + width * (si + 0.5))
                ys.append(vals[-1])
        bars = ax.bar(xs, ys, width * 0.92, color=_COLORS[si % len(_COLORS)], label=name or None)
        ax.bar_label(bars, labels=[value_format.format(v) for v in ys], fontsize=7, padding=2)
    long_labels = max((len(g) for g in groups), default=0) > 14
    ax.set_xticks(range(len(groups)), groups, rotation=20 if long_labels else 0, ha="right" if long_labels else "center",
                  fontsize=8 if long_labels else None)
    if logy:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel or (y if isinstance(y, str) else y[0]))
    ax.margins(y=0.15)
    ax.grid(True, axis="y", alpha=0.3)
    if any(names):
        ax.legend(fontsize=8, frameon=False)
    if title:
        ax.set_title(title, fontsize=11)
    return _save(fig, path)


def plot_latency(
    rows: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    title: str = "near-duplicate query latency",
    missing: str = "warn",
) -> str | None:
    """Latency (ms) vs N, one panel per k, one line per method; p50 solid, p99 dashed.

    Rows: ``{"method": "simdb", "n": 1_000_000, "k": 3, "p50_ms": 0.9, "p99_ms": 2.1}``
    (also accepted: ``rows``/``N`` for n, ``engine``/``impl`` for method, ``p50``/``ms``
    for the latency)."""
    return plot_lines(
        rows,
        path,
        x=N_KEYS,
        y=P50_KEYS,
        y2=P99_KEYS,
        series=METHOD_KEYS,
        panel=K_KEYS,
        panel_label="k = {}",
        xlabel="fingerprints in the collection (N)",
        ylabel="ms per query",
        logx=True,
        logy=True,
        title=f"{title} (p50 solid, p99 dashed)" if title else None,
        missing=missing,
    )


def plot_throughput(
    rows: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    title: str = "fingerprinting throughput",
    missing: str = "warn",
) -> str | None:
    """Fingerprinting MB/s, grouped by corpus (or language / workers), one bar per
    implementation. Rows: ``{"impl": "simdb", "corpus": "English", "mb_per_s": 4.2}``."""
    return plot_bars(
        rows,
        path,
        y=MBS_KEYS,
        group=GROUP_KEYS,
        series=METHOD_KEYS,
        ylabel="MB of text per second",
        title=title,
        missing=missing,
    )


def plot_f1(
    rows: Iterable[Any],
    path: str | os.PathLike[str],
    *,
    title: str = "quality vs Jaccard threshold",
    missing: str = "warn",
) -> str | None:
    """F1 vs threshold, one panel per language, one line per method; precision and
    recall (when present) thin dotted and dash-dotted in the same colour.
    Rows: ``{"method": "simdb two-stage", "lang": "en", "threshold": 0.8, "f1": 0.97,
    "precision": 0.99, "recall": 0.95}``."""
    if not available():
        _missing(missing)
        return None
    data = [r for r in _rows(rows) if _pick(r, THRESHOLD_KEYS) is not None and _pick(r, F1_KEYS) is not None]
    panels = _order(_pick(r, GROUP_KEYS, "") for r in data) or [""]
    names = _order(str(_pick(r, METHOD_KEYS, "")) for r in data)
    fig, axes = _figure(len(panels))
    for ax, pv in zip(axes, panels):
        for i, name in enumerate(names):
            pts = sorted(
                (float(_pick(r, THRESHOLD_KEYS)), r)
                for r in data
                if str(_pick(r, METHOD_KEYS, "")) == name and _pick(r, GROUP_KEYS, "") == pv
            )
            if not pts:
                continue
            c = _COLORS[i % len(_COLORS)]
            xs = [p[0] for p in pts]
            ax.plot(xs, [float(_pick(r, F1_KEYS)) for _, r in pts], marker="o", ms=4, lw=1.8, color=c, label=name)
            for keys, style in ((PRECISION_KEYS, ":"), (RECALL_KEYS, "-.")):
                vals = [(x, _pick(r, keys)) for x, r in pts if _pick(r, keys) is not None]
                if vals:
                    ax.plot([v[0] for v in vals], [float(v[1]) for v in vals], ls=style, lw=0.9, color=c)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("Jaccard threshold")
        ax.set_ylabel("F1")
        if pv != "":
            ax.set_title(str(pv), fontsize=10)
        ax.grid(True, alpha=0.3)
        if names:
            ax.legend(fontsize=8, frameon=False, loc="lower left")
    if title:
        fig.suptitle(f"{title} (F1 solid, precision dotted, recall dash-dot)", fontsize=11)
    return _save(fig, path)


# --------------------------------------------------------------------------- simdb's own benchmarks
#
# One call at the end of each script in benchmarks/ (each records its rows in a
# JSON-lines file next to the PNG, so runs at other N or thresholds add points).


def _history(png: str | os.PathLike[str], rows: list[dict[str, Any]], key: Sequence[str]) -> list[dict[str, Any]]:
    base, _ = os.path.splitext(os.fspath(png))
    return record(base + ".jsonl", rows, key=key)


def search_plot(results: Iterable[Mapping[str, Any]], png: str | os.PathLike[str], *, missing: str = "warn"):
    """benchmarks/bench_search.py: latency vs N at k=3 (simdb ``near``, sequential
    scan, pgvector HNSW) and simdb's latency vs k at each N, p50 solid, p99 dashed."""
    rows: list[dict[str, Any]] = []
    for r in results:
        if "variant" not in r:
            continue
        base = {"variant": r["variant"], "n": r["rows"]}
        for method, key in (("simdb near()", "near_k3_ms"), ("sequential scan", "seqscan_k3_ms")):
            if key in r:
                rows.append({**base, "method": method, "k": 3, "p50_ms": r[key]["p50"], "p99_ms": r[key]["p99"]})
        for ef, h in (r.get("hnsw") or {}).items():
            if isinstance(h, Mapping) and "p50_ms" in h:
                rows.append({**base, "method": f"pgvector HNSW ef_search={ef[2:]}", "k": 3, "p50_ms": h["p50_ms"],
                             "p99_ms": h.get("p99_ms"), "recall": h.get("recall")})
        for k, v in (r.get("per_k_ms") or {}).items():
            rows.append({**base, "method": "simdb near() per k", "k": int(k), "p50_ms": v["p50"], "p99_ms": v["p99"]})
    rows = _history(png, rows, ("variant", "method", "n", "k"))
    if not available():
        _missing(missing)
        return None
    fig, (left, right) = _figure(2)
    variants = _order(r["variant"] for r in rows)
    def label(r):
        return (r["method"] if len(variants) == 1 else f"{r['method']} ({r['variant']})")
    k3 = [r for r in rows if r["method"] != "simdb near() per k"]
    names = _order(label(r) for r in k3)
    for i, name in enumerate(names):
        pts = sorted((r["n"], r["p50_ms"], r.get("p99_ms")) for r in k3 if label(r) == name)
        c = _COLORS[i % len(_COLORS)]
        left.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.8, color=c, label=name)
        left.plot([p[0] for p in pts if p[2]], [p[2] for p in pts if p[2]], ls="--", lw=1.0, color=c)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("fingerprints in the collection (N)")
    left.set_ylabel("ms per query")
    left.set_title("k = 3: simdb vs sequential scan vs HNSW", fontsize=10)
    left.legend(fontsize=7, frameon=False)
    left.grid(True, alpha=0.3)
    perk = [r for r in rows if r["method"] == "simdb near() per k"]
    series = _order((r["variant"], r["n"]) for r in perk)
    for i, (variant, n) in enumerate(series):
        pts = sorted((r["k"], r["p50_ms"], r.get("p99_ms")) for r in perk if (r["variant"], r["n"]) == (variant, n))
        c = _COLORS[i % len(_COLORS)]
        name = f"N = {n:,}" + ("" if len(variants) == 1 else f" ({variant})")
        right.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=4, lw=1.8, color=c, label=name)
        right.plot([p[0] for p in pts if p[2]], [p[2] for p in pts if p[2]], ls="--", lw=1.0, color=c)
    right.set_yscale("log")
    right.set_xlabel("k (maximum Hamming distance)")
    right.set_ylabel("ms per query")
    right.set_title("simdb near(): latency vs k (exact for every k)", fontsize=10)
    if series:
        right.legend(fontsize=7, frameon=False)
    right.grid(True, alpha=0.3)
    fig.suptitle("near-duplicate query latency (p50 solid, p99 dashed)", fontsize=11)
    return _save(fig, png)


def fingerprint_plot(lang: str, rows: Iterable[Sequence[Any]], png: str | os.PathLike[str], *, missing: str = "warn"):
    """benchmarks/bench_fingerprint.py: ``rows`` of ``(name, MB/s, docs/s, MB per CPU-s)``
    for one corpus; call once per corpus, the PNG shows all of them."""
    new = [{"impl": r[0], "corpus": lang, "mb_per_s": float(r[1])} for r in rows]
    return plot_throughput(_history(png, new, ("impl", "corpus")), png, missing=missing)


def quality_plot(
    results: Iterable[Mapping[str, Any]],
    png: str | os.PathLike[str],
    threshold: float,
    *,
    missing: str = "warn",
):
    """benchmarks/bench_quality.py: F1 (with precision and recall) vs the Jaccard
    threshold per language and method (each run adds its threshold's points), and
    the candidate recall vs threshold for several k (one run gives the whole curve)."""
    results = list(results)
    rows = [
        {"lang": res["lang"], "method": name, "threshold": float(threshold), "f1": f, "precision": p, "recall": r}
        for res in results
        for name, p, r, f in res.get("rows", ())
    ]
    rows = _history(png, rows, ("lang", "method", "threshold"))
    if not available():
        _missing(missing)
        return None
    langs = _order(r["lang"] for r in rows)
    methods = _order(r["method"] for r in rows)
    fig, axes = _figure(2 * len(langs), width=6.4, height=4.2, cols=2)
    for li, lang in enumerate(langs):
        ax = axes[2 * li]
        for i, m in enumerate(methods):
            pts = sorted((r["threshold"], r["f1"], r["precision"], r["recall"]) for r in rows
                         if r["lang"] == lang and r["method"] == m)
            if not pts:
                continue
            c = _COLORS[i % len(_COLORS)]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=5, lw=1.8, color=c, label=m[:60])
            ax.plot([p[0] for p in pts], [p[2] for p in pts], ls=":", marker=".", lw=0.9, color=c)
            ax.plot([p[0] for p in pts], [p[3] for p in pts], ls="-.", marker=".", lw=0.9, color=c)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("Jaccard threshold T")
        ax.set_ylabel("F1 (precision dotted, recall dash-dot)")
        ax.set_title(f"{lang}: quality at J >= T", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, frameon=False, loc="lower left")
        ax = axes[2 * li + 1]
        res = next((x for x in results if x.get("lang") == lang and "recall_table" in x), None)
        if res is not None:
            tab = res["recall_table"].get("candidate") or next(iter(res["recall_table"].values()))
            ts = sorted(float(t) for t in tab if _is_number(t))
            series = tab[next(t for t in tab if _is_number(t))]
            for i, k in enumerate(k for k in (1, 3, 5, 7, 9, 11) if k < len(series)):
                ys = [tab[_key_of(tab, t)][k] for t in ts]
                ax.plot(ts, ys, marker="o", ms=4, lw=1.5, color=_COLORS[i % len(_COLORS)], label=f"k = {k}")
            ax.set_ylim(0, 1.02)
            ax.set_xlabel("Jaccard threshold T")
            ax.set_ylabel("SimHash candidate recall")
            ax.set_title(f"{lang}: pairs with J >= T found within k", fontsize=10)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7, frameon=False)
        else:
            ax.set_visible(False)
    fig.suptitle("near-duplicate quality vs Jaccard threshold", fontsize=11)
    return _save(fig, png)


def _is_number(x: Any) -> bool:
    try:
        float(x)
    except (TypeError, ValueError):
        return False
    return True


def _key_of(table: Mapping[Any, Any], t: float) -> Any:
    return next(k for k in table if _is_number(k) and float(k) == t)


def pairs_plot(png: str | os.PathLike[str], n: int, method: str, seconds: float, *, missing: str = "warn"):
    """benchmarks/bench_pairs.py: all-pairs time vs N (each run adds its N)."""
    rows = _history(png, [{"method": method, "n": int(n), "seconds": float(seconds)}], ("method", "n"))
    return plot_lines(rows, png, x="n", y="seconds", series="method", logx=True, logy=True,
                      xlabel="fingerprints in the collection (N)", ylabel="seconds for all pairs within k",
                      title="all near-duplicate pairs (k = 3 unless named)", missing=missing)


def shards_plot(results: Iterable[Mapping[str, Any]], png: str | os.PathLike[str], *, missing: str = "warn"):
    """benchmarks/bench_shards.py: lookup latency vs number of shards per mode and layout."""
    return plot_lines(list(results), png, x="shards", y="p50_ms", y2="p90_ms",
                      series=lambda r: f"{r.get('mode')}, {r.get('layout')}", logx=True,
                      xlabel="shards", ylabel="ms per lookup (p50 solid, p90 dashed)",
                      title="sharded layouts: one k <= 3 lookup", missing=missing)


def spark_pairs_plot(results: Iterable[Mapping[str, Any]], png: str | os.PathLike[str], *, missing: str = "warn"):
    """benchmarks/bench_spark.py: all-pairs seconds vs N for each Spark plan (and PostgreSQL)."""
    names = {"spark_blocks_s": "Spark, blocks", "spark_manku_s": "Spark, Manku tables",
             "spark_selfjoin_s": "Spark, naive self-join", "pg_pairs_s": "PostgreSQL pairs()"}
    rows = [
        {"method": label, "n": r["n"], "seconds": r[key]}
        for r in (results or ())
        for key, label in names.items()
        if r.get(key) is not None
    ]
    return plot_lines(rows, png, x="n", y="seconds", series="method", logx=True, logy=True,
                      xlabel="fingerprints (N)", ylabel="seconds for all pairs within k = 3",
                      title="all pairs with Spark", missing=missing)
