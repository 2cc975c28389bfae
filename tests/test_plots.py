"""Benchmark plots (benchmarks/plots.py): PNGs from result rows; no plot, no failure, without matplotlib."""

from __future__ import annotations

import struct
from collections import namedtuple

import pytest

from benchmarks import plots


def png_size(path) -> tuple[int, int]:
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


def is_plot(path) -> bool:
    """A real figure was drawn: a PNG of at least 300 x 200 pixels (a 2-tuple alone is always truthy)."""
    w, h = png_size(path)
    return w >= 300 and h >= 200


def test_latency_plot(tmp_path):
    rows = [
        {"method": m, "n": n, "k": k, "p50_ms": base * n ** e / 1e3, "p99_ms": 3 * base * n ** e / 1e3}
        for m, base, e in [("simdb", 0.5, 0.1), ("seq scan", 0.01, 1.0), ("HNSW", 0.2, 0.2)]
        for n in (10_000, 100_000, 1_000_000)
        for k in (3, 6)
    ]
    out = plots.plot_latency(rows, tmp_path / "sub" / "latency.png")
    w, h = png_size(out)
    assert w > 800 and h > 300  # two panels side by side


def test_throughput_plot_accepts_other_spellings(tmp_path):
    Row = namedtuple("Row", "impl lang mb_s")
    rows = [Row("simdb", "en", 5.2), Row("simhash (PyPI)", "en", 1.1), Row("simdb", "zh", 2.5), Row("simhash (PyPI)", "zh", 0.7)]
    assert png_size(plots.plot_throughput(rows, tmp_path / "fp.png"))[0] > 400


def test_f1_plot(tmp_path):
    rows = [
        {"method": m, "lang": lang, "threshold": t / 10, "f1": f, "precision": min(1, f + 0.05), "recall": f - 0.05}
        for m, f in [("simhash k=3", 0.4), ("two-stage", 0.95)]
        for lang in ("English", "Chinese")
        for t in range(5, 10)
    ]
    assert png_size(plots.plot_f1(rows, tmp_path / "f1.png"))[0] > 800


def test_generic_lines_and_bars(tmp_path):
    rows = [{"n": n, "seconds": n / 1e5, "method": "simdb"} for n in (1e5, 1e6, 1e7)]
    assert is_plot(plots.plot_lines(rows, tmp_path / "l.png", x="n", y="seconds", logx=True))
    assert is_plot(plots.plot_bars(rows, tmp_path / "b.png", y="seconds", group="n"))


def test_without_matplotlib_warns_or_raises(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plots, "available", lambda: False)
    assert plots.plot_latency([{"n": 1, "k": 3, "p50_ms": 1}], tmp_path / "x.png") is None
    assert "pip install matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plots.plot_f1([], tmp_path / "y.png", missing="raise")


def test_record_keeps_the_latest_row_per_key_and_beside(tmp_path):
    path = tmp_path / "results" / "pairs.jsonl"
    rows = plots.record(path, [{"method": "simdb", "n": 10, "s": 1.0}, {"method": "sql", "n": 10, "s": 2.0}], key=("method", "n"))
    assert len(rows) == 2
    rows = plots.record(path, [{"method": "simdb", "n": 10, "s": 0.5}, {"method": "simdb", "n": 100, "s": 3.0}], key=("method", "n"))
    assert sorted((r["method"], r["n"], r["s"]) for r in rows) == [("simdb", 10, 0.5), ("simdb", 100, 3.0), ("sql", 10, 2.0)]
    assert len(path.read_text().splitlines()) == 3
    assert len(plots.record(tmp_path / "log.jsonl", [{"a": 1}])) == 1
    assert len(plots.record(tmp_path / "log.jsonl", [{"a": 1}])) == 2  # no key: a log
    assert plots.beside("/x/benchmarks/bench_pairs.py", "pairs.png") == "/x/benchmarks/results/pairs.png"


def test_benchmark_adapters(tmp_path):
    """The one-call adapters the scripts in benchmarks/ use, fed their result shapes."""
    search = [
        {"layouts": {}},
        {
            "variant": "uniform", "rows": 1_000_000,
            "near_k3_ms": {"p50": 0.4, "p99": 0.9}, "seqscan_k3_ms": {"p50": 60.0, "p99": 80.0},
            "hnsw": {"build_s": 100, "ef40": {"p50_ms": 1.2, "p99_ms": 3.0, "recall": 0.5},
                     "ef200": {"p50_ms": 4.0, "p99_ms": 9.0, "recall": 0.8}},
            "per_k_ms": {str(k): {"p50": 0.3 * 1.5 ** k, "p99": 0.8 * 1.5 ** k, "exact": True} for k in range(12)},
        },
    ]
    png = tmp_path / "search.png"
    assert png_size(plots.search_plot(search, png))[0] > 800
    search[1]["rows"] = 100_000
    plots.search_plot(search, png)  # a second run at another N adds its points
    assert len((tmp_path / "search.jsonl").read_text().splitlines()) == 2 * (4 + 12)

    fp = tmp_path / "fingerprint.png"
    plots.fingerprint_plot("English", [("simdb many()", 5.0, 900, 5.1), ("PyPI simhash 2.1.2", 1.0, 200, 1.0)], fp)
    assert is_plot(plots.fingerprint_plot("Chinese", [("simdb many()", 2.0, 900, 2.1)], fp))

    quality = [
        {"lang": lang, "rows": [("SimHash alone k=3", 0.99, 0.3, 0.46), ("two-stage: SimHash + exact Jaccard", 0.99, 0.95, 0.97)],
         "recall_table": {"candidate": {**{t: [min(1, t * k / 8) for k in range(12)] for t in (0.5, 0.6, 0.7, 0.8, 0.9, 0.95)},
                                        "candidates_per_text": [0.1] * 12}}}
        for lang in ("en", "zh")
    ]
    assert png_size(plots.quality_plot(quality, tmp_path / "quality.png", 0.8))[0] > 800
    assert is_plot(plots.quality_plot(quality, tmp_path / "quality.png", 0.9))

    assert is_plot(plots.pairs_plot(tmp_path / "pairs.png", 1_000_000, "simdb pairs()", 6.1))
    assert is_plot(plots.pairs_plot(tmp_path / "pairs.png", 10_000_000, "simdb pairs()", 150.0))

    shards = [{"mode": m, "layout": lay, "shards": s, "p50_ms": 0.1 * s, "p90_ms": 0.2 * s, "shards_touched": s}
              for m in ("partitions", "fdw") for lay in ("by_key", "by_block") for s in (1, 4, 16, 64)]
    assert is_plot(plots.shards_plot(shards, tmp_path / "shards.png"))


def test_spark_pairs_adapter(tmp_path):
    rows = [{"n": n, "spark_blocks_s": n / 1e5, "spark_manku_s": n / 2e5, "pg_pairs_s": n / 3e5} for n in (10**6, 10**7)]
    rows[0]["spark_selfjoin_s"] = 100.0
    assert is_plot(plots.spark_pairs_plot(rows, tmp_path / "spark.png"))
