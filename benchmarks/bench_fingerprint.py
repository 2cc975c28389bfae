"""Fingerprinting throughput: simdb vs the PyPI ``simhash`` package vs the floor, English and Chinese.

Run (one benchmark at a time on a shared machine)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_fingerprint.py

Every contender fingerprints the same documents (``benchmarks/corpus.py``: stdlib /
SQLAlchemy / Django docstrings for English, gettext zh_CN/zh_TW catalogues for
Chinese). Figures are MB/s of UTF-8 input and documents/s, best of ``--repeat``
wall-clock runs (best-of filters out other load on the machine), and MB per CPU
second (all processes, pool workers included: throughput per core, which other
load on a shared machine does not distort):

- ``floor``: ``re.findall(r"\\w+")`` + ``xxh64`` per token, no counting, no bit sums.
- ``simdb fingerprint()``: ``Fingerprinter()`` (default pipeline), one call per document.
- ``simdb many()``: the batch call, in-process; ``many(workers=2)``: the process pool
  (warmed up first: workers started, jieba loaded).
- ``simdb preset simhash-pypi``: simdb's exact reproduction of the PyPI package.
- ``PyPI simhash``: ``simhash.Simhash(doc).value`` (2.1.2).
- ``jieba.lcut``: jieba's own segmentation speed (precise mode), the bound for Chinese.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import xxhash  # noqa: E402

from benchmarks.corpus import chinese_docs, english_docs  # noqa: E402


def _pool_cpu() -> float:
    """CPU seconds used so far by simdb's worker processes (needs psutil; 0 without it)."""
    try:
        import psutil

        from simdb.util import parallel as F
    except ImportError:
        return 0.0
    total = 0.0
    for ex in list(F._POOLS.values()):
        for pid in list((getattr(ex, "_processes", None) or {}).keys()):
            try:
                t = psutil.Process(pid).cpu_times()
                total += t.user + t.system
            except psutil.Error:
                pass
    return total


def best_of(fn, docs, repeat):
    """(best wall seconds, CPU seconds of that run incl. pool workers)."""
    best = (float("inf"), float("inf"))
    for _ in range(repeat):
        c0, w0 = time.process_time(), _pool_cpu()
        t = time.perf_counter()
        fn(docs)
        wall = time.perf_counter() - t
        cpu = time.process_time() - c0 + _pool_cpu() - w0
        best = min(best, (wall, cpu))
    return best


def floor(docs):
    findall = re.compile(r"\w+").findall
    h = xxhash.xxh64_intdigest
    for d in docs:
        for tok in findall(d):
            h(tok.encode("utf-8"))


def _edit(doc: str, rng, lang: str, vocab: list[str]) -> str:
    """A light, realistic edit: ~1% of the words (zh: characters) replaced, sometimes a clause dropped."""
    sep = ". " if lang == "English" else "，"
    if lang == "English":
        units = doc.split(" ")
    else:
        units = list(doc)
    for _ in range(max(1, len(units) // 100)):
        units[rng.randrange(len(units))] = rng.choice(vocab)
    text = (" " if lang == "English" else "").join(units)
    parts = text.split(sep)
    if len(parts) > 4 and rng.random() < 0.5:
        del parts[rng.randrange(len(parts))]
    return sep.join(parts)


QUALITY_CONFIGS = {
    "default (words, stopwords, tf)": {},
    "stopwords kept": {"stopwords": False},
    "binary": {"weighting": "binary"},
    "1+log(tf)": {"weighting": "logtf"},
    "tf-idf (fitted on the corpus)": {"weighting": "tfidf"},
    "word 3-shingles": {"ngram": 3},
    "4-character shingles": {"tokenizer": "chars"},
    "jieba keywords (top 20)": {"tokenizer": "keywords"},
    "PyPI simhash algorithm": {"algorithm": "simhash-pypi"},
}


def quality(corpora, k: int = 3, seed: int = 1):
    """Each document gets one lightly edited copy; every (document, other text) pair is a
    candidate. Reports precision / recall / F1 of "distance <= k" for the copy pairs, the best
    F1 over k in 0..16, and how often an unrelated pair is within k."""
    import random

    import numpy as np

    import simdb

    print("\nNear-duplicate quality: each document vs its lightly edited copy (1% of words / Han "
          "characters replaced, half also lose a clause) and vs every other document and copy")
    for lang, docs in corpora.items():
        rng = random.Random(seed)
        if lang == "English":
            vocab = [w for d in docs for w in d.split() if w.isalpha()]
        else:
            vocab = [c for d in docs for c in d if "\u4e00" <= c <= "\u9fff"]
        variants = [_edit(d, rng, lang, vocab) for d in docs]
        n = len(docs)
        print(f"  {lang + ' (' + str(n) + ' docs)':<34} {'P@' + str(k):>7} {'R@' + str(k):>7} {'F1@' + str(k):>7}"
              f"   best F1 (k)   unrelated within {k}")
        for name, cfg in QUALITY_CONFIGS.items():
            fp = simdb.Fingerprinter().fit_idf(docs) if cfg.get("weighting") == "tfidf" else simdb.Fingerprinter(**cfg)
            a = np.array(fp.many(docs), dtype=np.uint64)
            b = np.array(fp.many(variants), dtype=np.uint64)
            allfp = np.concatenate([a, b])
            d = np.bitwise_count(a[:, None] ^ allfp[None, :]).astype(np.int16)  # (n, 2n)
            pos = np.zeros_like(d, dtype=bool)
            pos[np.arange(n), n + np.arange(n)] = True
            valid = np.ones_like(pos)
            valid[np.arange(n), np.arange(n)] = False  # a document with itself
            best = (0.0, 0)
            row = None
            for kk in range(17):
                hit = (d <= kk) & valid
                tp = int((hit & pos).sum())
                fpos = int((hit & ~pos).sum())
                prec = tp / (tp + fpos) if tp + fpos else 1.0
                rec = tp / n
                f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
                if f1 > best[0]:
                    best = (f1, kk)
                if kk == k:
                    row = (prec, rec, f1, fpos / int((valid & ~pos).sum()))
            print(f"    {name:<32} {row[0]:7.1%} {row[1]:7.1%} {row[2]:7.3f}   {best[0]:.3f} ({best[1]:2d})"
                  f"   {row[3]:.4%}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--en-chars", type=int, default=2_000_000, help="English corpus size (characters)")
    ap.add_argument("--zh-chars", type=int, default=300_000, help="Chinese corpus size (characters)")
    ap.add_argument("--doc-chars", type=int, default=3000,
                    help="English document size (characters; e.g. 800 for short paragraphs)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--skip-pypi", action="store_true", help="leave out the (slow) PyPI simhash package")
    ap.add_argument("--quality", type=int, default=400, metavar="N",
                    help="also measure near-duplicate quality of the options on N docs per language (0: skip)")
    args = ap.parse_args(argv)

    import simdb

    fp = simdb.Fingerprinter()
    compat = simdb.Fingerprinter.preset("simhash-pypi")
    try:
        from simhash import Simhash
    except ImportError:  # pip install simhash==2.1.2 (the [bench] extra)
        Simhash = None
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()

    corpora = {
        "English": english_docs(args.en_chars, doc_chars=args.doc_chars),
        "Chinese": chinese_docs(args.zh_chars, doc_chars=1000),
    }
    print(f"python {platform.python_version()}, {os.cpu_count()} cores, load avg {os.getloadavg()[0]:.1f}; "
          f"segmenter {simdb.core.segment.backend()}; "
          f"best of {args.repeat} interleaved rounds")
    for lang, docs in corpora.items():
        nbytes = sum(len(d.encode("utf-8")) for d in docs)
        print(f"\n{lang}: {len(docs)} docs, {nbytes / 1e6:.2f} MB UTF-8, {nbytes / len(docs) / 1e3:.1f} kB/doc")
        # warm caches, jieba and the pool outside the timings
        fp.many(docs[:50])
        fp.many(docs, workers=args.workers)  # the pool starts once (a small input stays in process)
        contenders = [
            ("floor: \\w+ findall + xxh64", floor),
            ("simdb fingerprint() per doc", lambda ds: [fp.fingerprint(d) for d in ds]),
            ("simdb many()", fp.many),
            (f"simdb many(workers={args.workers})", lambda ds: fp.many(ds, workers=args.workers)),
        ]
        if lang == "Chinese":
            tok = jieba.dt
            contenders.append(("jieba.lcut (segmentation only)", lambda ds: [tok.lcut(d) for d in ds]))
            if simdb.core.segment.backend() == "rjieba":
                import rjieba

                rj = rjieba.Jieba()
                contenders.append(("rjieba.cut (segmentation only)", lambda ds: [rj.cut(d, True) for d in ds]))

                def many_with_jieba(ds):
                    simdb.core.segment.use("jieba")
                    try:
                        return fp.many(ds)
                    finally:
                        simdb.core.segment.use(None)

                contenders.append(("simdb many(), jieba segmenter", many_with_jieba))
                if many_with_jieba(docs) != fp.many(docs):
                    raise SystemExit("rjieba and jieba fingerprints differ")
        contenders.append(("simdb preset simhash-pypi", compat.many))
        failures = []
        if Simhash is not None and not args.skip_pypi:

            def pypi(ds):
                failures.clear()
                for d in ds:
                    try:
                        Simhash(d).value
                    except OverflowError:  # NumPy 2: a 4-gram counted > 255 times overflows uint8
                        failures.append(d)

            contenders.append(("PyPI simhash 2.1.2", pypi))
        # Rounds interleave the contenders so that each sees the same background load;
        # each keeps its best round.
        best = {name: (float("inf"), float("inf")) for name, _ in contenders}
        for _ in range(args.repeat):
            for name, fn in contenders:
                best[name] = min(best[name], best_of(fn, docs, 1))
        rows = [(name, nbytes / dt / 1e6, len(docs) / dt, nbytes / cpu / 1e6) for name, (dt, cpu) in best.items()]
        if failures:
            print(f"  (PyPI simhash raised OverflowError on {len(failures)} of {len(docs)} docs: "
                  "a 4-gram counted more than 255 times; simdb's simhash-pypi preset returns the NumPy 1 value)")
        width = max(len(r[0]) for r in rows)
        print(f"  {'':<{width}}  {'MB/s':>8}  {'docs/s':>9}  {'MB per CPU-s':>12}")
        for name, mbs, dps, cpu_mbs in rows:
            print(f"  {name:<{width}}  {mbs:8.2f}  {dps:9.0f}  {cpu_mbs:12.2f}")
        speed = {name: mbs for name, mbs, _, _ in rows}
        simdb1 = speed["simdb many()"]
        print("  ratios:")
        print(f"    simdb many() / floor             {simdb1 / rows[0][1]:.2f}")
        if "PyPI simhash 2.1.2" in speed:
            print(f"    simdb many() / PyPI simhash      {simdb1 / speed['PyPI simhash 2.1.2']:.1f}")
            print(f"    simdb simhash-pypi / PyPI        {speed['simdb preset simhash-pypi'] / speed['PyPI simhash 2.1.2']:.1f}")
        if lang == "Chinese":
            print(f"    simdb many() / jieba.lcut        {simdb1 / speed['jieba.lcut (segmentation only)']:.2f}")
            if "rjieba.cut (segmentation only)" in speed:
                print(f"    rjieba.cut / jieba.lcut          "
                      f"{speed['rjieba.cut (segmentation only)'] / speed['jieba.lcut (segmentation only)']:.1f}")
                print(f"    many() rjieba / many() jieba     {simdb1 / speed['simdb many(), jieba segmenter']:.2f}"
                      "  (fingerprints identical: checked)")
        print(f"    many(workers={args.workers}) / many()        "
              f"{speed[f'simdb many(workers={args.workers})'] / simdb1:.2f}")
        import plots  # benchmarks/plots.py (scripts run with benchmarks/ on sys.path)
        plots.fingerprint_plot(lang, rows, plots.beside(__file__, "fingerprint.png"))  # PNG in benchmarks/results/
    simdb.core.fingerprint.shutdown_pools()
    if args.quality:
        quality({"English": english_docs(None, doc_chars=1500)[: args.quality],
                 "Chinese": chinese_docs(None, doc_chars=600)[: args.quality]})


if __name__ == "__main__":
    main()
