"""``simdb dedup`` side by side with in-memory MinHash tools, on the same records in the same run,
each scored against the exact rule (issue 46).

Run (one benchmark at a time on a shared machine)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_dedup_tools.py --records 60000 \\
        --extra-path /tmp/h8site --with-datasketch

Data (``--records``, ``--seed``, ``--dup-share``): each record is 2-4 real paragraphs of English
(random docstrings of ``benchmarks.corpus.english_pieces()``, joined with blank lines); a
``--dup-share`` of the records are one-word copies of an earlier record (one word replaced by a
random vocabulary word), shuffled into the stream. Written once as JSONL ``{"id": "p<i>", "text"}``.
The corpus has ~5,200 docstrings, so at 200k records each recurs in ~115 records: two records
share a docstring often, and two that share a long one (22 are over 10,000 characters) can be
near-duplicates without being planted. The truth counts those too; every tool is scored on it.

The truth (``exact``): keep-first over the **exact** Jaccard of the character 4-gram sets >= 0.8,
with simdb's own grams (``simdb.core.sketch.chars``: NFKC + casefold, word characters only, the
int4 hash of each 4-gram; the full set, not a sketch), so "exact" means the sets simdb sketches.
A record's earlier partners at J >= 0.8 are found by prefix filtering (grams ordered rarest
first, by a global count table; two sets with J >= t share one of the first
``|A| - ceil(t|A|) + 1`` grams of each), the size filter (``|A| >= t|B|``), a count filter on
the prefix grams shared, a bitset bound (8192 buckets: each bucket A fills and B does not holds
a gram B lacks), then the exact intersection; it is removed when one of them is kept, which
needs only their decisions (:class:`LazyTruth`). Scored on ``--truth-sample`` records drawn
uniformly (default 5,000; all records where that is >= ``--records``): a tool's misses and
extra removals among them estimate its rates over the whole run without bias (the tools run
on every record). ``--check-truth`` first compares the rule, deciding every record, with brute
force (all pairs, Python sets) on the first 1,000 records.

Contenders, each in its own process (``/usr/bin/time``: wall seconds, CPU seconds, peak RSS):

1. ``floor``: read the JSONL + ``simdb.Fingerprinter().many(texts)`` (the floor of any dedup
   that fingerprints every text once; decides nothing);
2. ``simdb dedup IN -o OUT --removed LOG -q`` of the tree ``--simdb-root`` (default: this one);
   without ``-c`` it decides in memory (docs/dedup.md), the database is never opened;
3. ``rensa 16x8``: rensa's ``RMinHash`` (num_perm=128) + ``RMinHashLSH`` with 16 bands x 8 rows,
   on character 4-grams as strings: the lower-cased text, every 4-character window (rensa's
   usual shingling; close to simdb's normalisation but not the same: spaces, punctuation and
   line breaks stay in the grams). Keep-first greedy: each record queries the LSH of the kept
   records and is kept unless a candidate's estimated Jaccard is >= 0.8; kept ones are inserted;
4. ``rensa default``: the same grams through ``RMinHashDeduplicator(threshold=0.8, num_perm=128,
   use_lsh=True)`` with its default bands (rensa 0.5: 8 bands x 16 rows at threshold 0.8), whose
   ``add`` is the same keep-first rule (it names no kept partner);
5. ``datasketch`` (``--with-datasketch``): ``MinHash(num_perm=128)`` + ``MinHashLSH(threshold=0.8)``
   (its own optimal bands), the same grams and greedy loop as 3.

rensa and datasketch are not simdb dependencies: without them the script says
``pip install rensa datasketch`` and skips their rows. ``--extra-path DIR`` (repeatable) appends
DIR to the contenders' ``sys.path`` (after their site-packages), e.g. a ``pip install --target DIR``.

Output: a table and one JSON line (also appended to ``benchmarks/results/dedup_tools.jsonl``):
per contender records, seconds, CPU s, peak RSS MB, kept, removed, and against the truth the
removals it misses and the removals it adds on the records scored (counts and % of the
truth's removals there); the ratios simdb / floor and simdb / rensa 16x8 (wall and CPU
seconds, same run: on a shared machine the CPU seconds are the steadier figure).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.bench_dedup import timed  # noqa: E402
from benchmarks.corpus import english_pieces  # noqa: E402
from simdb.core.sketch.chars import char_shingle_set, grouped_sketches  # noqa: E402

THRESHOLD = 0.8

FLOOR = """
import json, sys, time
from simdb import Fingerprinter
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
fps = Fingerprinter().many(texts)
"""

# argv: data, removal log, mode (lsh:<bands> | dedup | datasketch), extra paths (appended)
MINHASH = """
import json, sys
sys.path.extend(sys.argv[4:])
data, log, mode = sys.argv[1:4]
NUM_PERM, T, BATCH = 128, 0.8, 2000

def grams(text):
    t = text.lower()
    return [t[i:i + 4] for i in range(len(t) - 3)] or [t]

ids, texts = [], []
for line in open(data, encoding="utf-8"):
    r = json.loads(line)
    ids.append(r["id"])
    texts.append(r["text"])

def sketches():
    if mode == "datasketch":
        from datasketch import MinHash
        for t in texts:
            m = MinHash(num_perm=NUM_PERM)
            m.update_batch([g.encode("utf-8") for g in set(grams(t))])
            yield m
        return
    from rensa import RMinHash
    for a in range(0, len(texts), BATCH):  # batched: the gram lists of every text would not fit
        yield from RMinHash.from_token_sets([grams(t) for t in texts[a:a + BATCH]], num_perm=NUM_PERM, seed=42)

removed = []
if mode == "dedup":
    from rensa import RMinHashDeduplicator
    dd = RMinHashDeduplicator(threshold=T, num_perm=NUM_PERM, use_lsh=True)
    for i, m in enumerate(sketches()):
        if not dd.add(str(i), m):
            removed.append({"removed": ids[i], "kept": None, "jaccard": None})
else:
    if mode == "datasketch":
        from datasketch import MinHashLSH
        lsh = MinHashLSH(threshold=T, num_perm=NUM_PERM)
    else:
        from rensa import RMinHashLSH
        lsh = RMinHashLSH(threshold=T, num_perm=NUM_PERM, num_bands=int(mode.split(":")[1]))
    kept = {}
    for i, m in enumerate(sketches()):
        best, partner = -1.0, None
        for c in lsh.query(m):
            j = m.jaccard(kept[c])
            if j > best or (j == best and c < partner):
                best, partner = j, c
        if best >= T:
            removed.append({"removed": ids[i], "kept": ids[partner], "jaccard": round(best, 4)})
        else:
            kept[i] = m
            lsh.insert(i, m)
with open(log, "w", encoding="utf-8") as fh:
    for r in removed:
        fh.write(json.dumps(r) + "\\n")
"""


def make_data(path: str, n: int, dup_share: float, seed: int) -> tuple[dict, list[str], list[str]]:
    """The records (written to ``path`` as JSONL), their ids and texts."""
    rng = random.Random(seed)
    pieces = english_pieces()
    vocab = sorted({w for p in pieces[:500] for w in p.split()})
    ids: list[str] = []
    texts: list[str] = []
    planted = 0
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if texts and rng.random() < dup_share:
                words = rng.choice(texts).split(" ")
                words[rng.randrange(len(words))] = rng.choice(vocab)
                text = " ".join(words)
                planted += 1
            else:
                text = "\n\n".join(rng.choice(pieces) for _ in range(rng.randint(2, 4)))
            ids.append(f"p{i}")
            texts.append(text)
            fh.write(json.dumps({"id": ids[-1], "text": text}) + "\n")
    info = {"records": n, "planted_one_word_copies": planted, "bytes": os.path.getsize(path),
            "mean_chars": round(sum(map(len, texts)) / max(n, 1))}
    return info, ids, texts


# ---------------------------------------------------------------------------------------------
# the truth: the exact rule, decided lazily for the records scored


def _min_overlap(na: np.ndarray, nb: np.ndarray, t: float) -> np.ndarray:
    """The least |A & B| with J >= t: ceil(t / (1 + t) * (|A| + |B|)) (a hair under, for float error)."""
    return np.ceil(t / (1 + t) * (na + nb) - 1e-9).astype(np.int64)


def _prefix_len(n: np.ndarray, t: float) -> np.ndarray:
    """|A| - ceil(t |A|) + 1: two sets at J >= t share one of the first that many grams of each."""
    return np.where(n > 0, n - np.ceil(t * n - 1e-9).astype(np.int64) + 1, 0)


def _prefixes(vals: np.ndarray, offsets: np.ndarray, plen: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each set's first ``plen`` grams in the global order (rarest first, ties by value): as
    (uint32 gram value, record) pairs. Rarity: a count table of 2**24 cells indexed by the gram's
    low bits (a collision only makes a gram look commoner: any fixed order is correct, this
    one keeps prefixes rare)."""
    u = vals.view(np.uint32)
    table = np.bincount(u & 0xFFFFFF, minlength=1 << 24).astype(np.uint64)
    n = len(plen)
    chunk = 4096  # 12 bits of record number, 20 of count, 32 of value in one uint64 sort key
    out_v, out_r = [], []
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        seg = slice(offsets[a], offsets[b])
        lens = np.diff(offsets[a:b + 1])
        local = np.repeat(np.arange(b - a, dtype=np.uint64), lens)
        cnt = np.minimum(table[u[seg] & 0xFFFFFF], (1 << 20) - 1)
        key = np.sort((local << np.uint64(52)) | (cnt << np.uint64(32)) | u[seg].astype(np.uint64))
        rank = np.arange(len(key)) - np.repeat(np.cumsum(lens) - lens, lens)
        take = rank < np.repeat(plen[a:b], lens)
        key = key[take]
        out_v.append((key & np.uint64(0xFFFFFFFF)).astype(np.uint32))
        out_r.append((key >> np.uint64(52)).astype(np.int64) + a)
    return np.concatenate(out_v), np.concatenate(out_r)


BITSET_BITS = 8192


def _bitsets(vals: np.ndarray, offsets: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Each set as a bitset of :data:`BITSET_BITS` buckets (a gram's top bits): the buckets holding
    one of its grams (uint64 words, one row per record)."""
    n = len(offsets) - 1
    u = vals.view(np.uint32)
    shift = np.uint32(32 - int(math.log2(BITSET_BITS)))
    out = np.zeros((n, BITSET_BITS // 64), dtype=np.uint64)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        seg = slice(offsets[a], offsets[b])
        rows = np.repeat(np.arange(b - a), np.diff(offsets[a:b + 1]))
        flags = np.zeros((b - a, BITSET_BITS), dtype=bool)
        flags[rows, u[seg] >> shift] = True
        out[a:b] = np.packbits(flags, axis=1, bitorder="little").view(np.uint64)
    return out


def _bitset_filter(bits: np.ndarray, sizes: np.ndarray, i: np.ndarray, j: np.ndarray, t: float,
                   chunk: int = 50_000) -> np.ndarray:
    """Which pairs may still reach the overlap J >= t needs: a bucket that A fills and B does not
    holds at least one gram of A that B lacks, so ``|A & B| <= |A| - popcount(A & ~B)`` (and the
    same from B). Exact as a bound; sharp for sets of up to a few thousand grams (~130 words per
    pair instead of a merge of ~4,000 values)."""
    keep = np.zeros(len(i), dtype=bool)
    for a in range(0, len(i), chunk):
        ba, bb = bits[i[a:a + chunk]], bits[j[a:a + chunk]]
        only_a = np.bitwise_count(ba & ~bb).sum(axis=1, dtype=np.int64)
        only_b = np.bitwise_count(bb & ~ba).sum(axis=1, dtype=np.int64)
        si, sj = sizes[i[a:a + chunk]], sizes[j[a:a + chunk]]
        bound = np.minimum(si - only_a, sj - only_b)
        keep[a:a + chunk] = bound >= _min_overlap(si, sj, t)
    return keep


def _overlaps(vals: np.ndarray, offsets: np.ndarray, i: np.ndarray, j: np.ndarray,
              budget: int = 20_000_000) -> np.ndarray:
    """|A & B| of each pair, exactly: the two sorted sets of each pair tagged with the pair's
    number, merged by one sort, equal neighbours counted (the sign bit flipped, so that each set's
    int32 order is its key order: two sorted runs, which a stable sort merges in linear time)."""
    sizes = np.diff(offsets)
    out = np.zeros(len(i), dtype=np.int64)
    cost = np.cumsum(sizes[i] + sizes[j])
    lo = 0
    u = vals.view(np.uint32)
    while lo < len(i):
        hi = max(int(np.searchsorted(cost, (cost[lo - 1] if lo else 0) + budget, side="right")), lo + 1)
        parts = []
        for side in (i[lo:hi], j[lo:hi]):
            lens = sizes[side]
            starts = np.repeat(offsets[side] - (np.cumsum(lens) - lens), lens)
            idx = starts + np.arange(int(lens.sum()))
            tag = np.repeat(np.arange(hi - lo, dtype=np.uint64), lens)
            parts.append((tag << np.uint64(32)) | (u[idx] ^ np.uint32(0x80000000)).astype(np.uint64))
        key = np.sort(np.concatenate(parts), kind="stable")
        dup = key[1:][key[1:] == key[:-1]]
        out[lo:hi] = np.bincount((dup >> np.uint64(32)).astype(np.int64), minlength=hi - lo)
        lo = hi
    return out


def keep_first(i: np.ndarray, j: np.ndarray, jac: np.ndarray) -> dict[int, int]:
    """The rule from all pairs (i < j) at J >= t: removed record -> the kept record it is nearest
    to (ties: the earliest); records in input order, each removed when a record kept before it
    is at J >= t (the brute-force check's side)."""
    order = np.lexsort((i, -jac, j))
    removed: dict[int, int] = {}
    for a, b in zip(i[order].tolist(), j[order].tolist()):
        if b not in removed and a not in removed:
            removed[b] = a
    return removed


class LazyTruth:
    """The exact rule's decision for chosen records, without deciding all of them: a record is
    removed when one of its earlier partners at J >= t is kept, so its decision needs only the
    decisions of those partners (and theirs, ...: duplicate chains are short). A record's earlier
    partners: the records whose prefix shares a gram with its prefix (an inverted index of the
    prefixes), then the size filter, the count filter (the prefix grams they share plus the
    longer of the two rests must reach the overlap J >= t needs: a shared gram outside both
    prefixes lies past the prefix that ends first in the global order, so in that set's rest),
    the bitset bound, and the exact intersection.

    Why lazily, and a sample: all pairs sharing a prefix gram grow about as N**2 here (two
    records that share a docstring share most of their prefixes: ~2e7 such pairs at 6,000
    records), while one record's partners take about a millisecond at 10,000 records; a uniform
    sample of records scored this way estimates the whole run's misses and extra removals
    without bias, and every record is scored where ``--truth-sample`` >= ``--records``."""

    def __init__(self, texts: list[str], t: float = THRESHOLD) -> None:
        self.t = t
        self.vals, self.offsets = grouped_sketches(texts, 1 << 40)
        self.sizes = np.diff(self.offsets)
        self.plen = _prefix_len(self.sizes, t)
        pv, pr = _prefixes(self.vals, self.offsets, self.plen)  # in record order
        self.cols = np.unique(pv, return_inverse=True)[1].ravel()
        self.rec_start = np.searchsorted(pr, np.arange(len(texts) + 1))
        order = np.lexsort((pr, self.cols))
        self.post = pr[order]
        self.post_start = np.searchsorted(self.cols[order], np.arange(int(self.cols.max(initial=0)) + 2))
        self.bits = _bitsets(self.vals, self.offsets)
        self.decided: dict[int, int | None] = {}  # record -> the kept partner it is removed for, None: kept
        self.probes = 0

    def partners(self, x: int) -> list[int]:
        """The records before ``x`` at J >= t with it, nearest first (ties: the earliest)."""
        self.probes += 1
        cs = self.cols[self.rec_start[x]:self.rec_start[x + 1]]
        if not len(cs):
            return []
        post = np.concatenate([self.post[self.post_start[c]:self.post_start[c + 1]] for c in cs.tolist()])
        i, cnt = np.unique(post[post < x], return_counts=True)
        sizes, plen, t = self.sizes, self.plen, self.t
        sx = sizes[x]
        ok = np.minimum(sizes[i], sx) >= t * np.maximum(sizes[i], sx) - 1e-9
        ok &= cnt + np.maximum(sizes[i] - plen[i], sx - plen[x]) >= _min_overlap(sizes[i], sx, t)
        i = i[ok]
        j = np.full(len(i), x, dtype=np.int64)
        i = i[_bitset_filter(self.bits, sizes, i, j[:len(i)], t)]
        if not len(i):
            return []
        j = j[:len(i)]
        inter = _overlaps(self.vals, self.offsets, i, j)
        jac = inter / np.maximum(sizes[i] + sx - inter, 1)
        order = np.lexsort((i, -jac))
        return [int(i[k]) for k in order if jac[k] >= t]

    def decide(self, x: int) -> int | None:
        """The kept record ``x`` is removed for, or None when the rule keeps it."""
        found: dict[int, list[int]] = {}
        stack = [x]
        while stack:  # depth first, without recursion: a chain of copies may be long
            y = stack[-1]
            if y in self.decided:
                stack.pop()
                continue
            if y not in found:
                found[y] = self.partners(y)
            todo = [p for p in found[y] if p not in self.decided]
            if todo:
                stack.extend(todo)  # decide the earlier partners first, then y again
                continue
            self.decided[y] = next((p for p in found[y] if self.decided[p] is None), None)
            stack.pop()
        return self.decided[x]


def check_truth(texts: list[str], t: float = THRESHOLD) -> dict:
    """:class:`LazyTruth`, deciding every record, against brute force (every pair, Python sets)."""
    sets = [set(char_shingle_set(x).tolist()) for x in texts]
    pairs = []
    for b in range(len(sets)):
        for a in range(b):
            inter = len(sets[a] & sets[b])
            union = len(sets[a]) + len(sets[b]) - inter
            if union and inter / union >= t:
                pairs.append((a, b, inter / union))
    i, j, jac = (np.array(c) for c in zip(*pairs)) if pairs else (np.zeros(0, np.int64),) * 3
    brute = keep_first(i, j, jac)
    lazy = LazyTruth(texts, t)
    found = {x: p for x in range(len(texts)) if (p := lazy.decide(x)) is not None}
    if found != brute:
        raise SystemExit(f"truth self-check failed: {len(set(brute) - set(found))} removals missed, "
                         f"{len(set(found) - set(brute))} extra, or another kept partner")
    return {"records": len(texts), "pairs_at_t": len(pairs), "removed": len(brute), "same_as_brute_force": True}


# ---------------------------------------------------------------------------------------------
# contenders


def _removed_log(path: str) -> dict[str, str | None]:
    with open(path, encoding="utf-8") as fh:
        return {r["removed"]: r["kept"] for r in map(json.loads, fh)}


def _has(module: str, extra: list[str]) -> bool:
    code = f"import sys; sys.path.extend({extra!r}); import {module}"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def score(removed: set[str], truth: set[str]) -> dict:
    missed, extra = len(truth - removed), len(removed - truth)
    base = max(len(truth), 1)
    return {"missed": missed, "missed_pct": round(100 * missed / base, 2),
            "extra": extra, "extra_pct": round(100 * extra / base, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=60_000)
    ap.add_argument("--dup-share", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--truth-sample", type=int, default=5000,
                    help="records scored against the exact rule, drawn uniformly (all where >= --records)")
    ap.add_argument("--simdb-root", default=ROOT, help="the source tree whose simdb dedup runs (default: this one)")
    ap.add_argument("--extra-path", action="append", default=[],
                    help="appended to the contenders' sys.path (where rensa / datasketch are installed)")
    ap.add_argument("--with-datasketch", action="store_true", help="also datasketch MinHashLSH (slow)")
    ap.add_argument("--check-truth", action="store_true",
                    help="first check the exact rule against brute force on the first 1,000 records")
    args = ap.parse_args()
    py = sys.executable
    n = args.records
    extra = [os.path.abspath(p) for p in args.extra_path]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_")}
    env["PYTHONPATH"] = os.path.abspath(args.simdb_root)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="simdb-bench-tools-") as tmp:
        env["SIMDB_HOME"] = os.path.join(tmp, "home")  # unused without -c; kept away from the user's
        data = os.path.join(tmp, "records.jsonl")
        info, ids, texts = make_data(data, n, args.dup_share, args.seed)
        checked = check_truth(texts[:1000]) if args.check_truth else None
        t0 = time.perf_counter()
        lazy = LazyTruth(texts)
        del texts
        t1 = time.perf_counter()
        scored = sorted(random.Random(args.seed + 1).sample(range(n), min(args.truth_sample, n)))
        truth = {ids[x] for x in scored if lazy.decide(x) is not None}
        scored_ids = {ids[x] for x in scored}
        exact = {"scored_records": len(scored), "removed": len(truth),
                 "removed_estimate": round(len(truth) * n / max(len(scored), 1)), "records_decided": len(lazy.decided),
                 "seconds": {"index": round(t1 - t0, 1), "decide": round(time.perf_counter() - t1, 1)}}
        del lazy

        def row(name: str, wall: float, kb: int, cpu: float, removed: set[str] | None) -> dict:
            r: dict = {"contender": name, "records": n, "seconds": round(wall, 2), "cpu_s": round(cpu, 1),
                       "peak_rss_mb": round(kb / 1024)}
            if removed is not None:
                r.update(kept=n - len(removed), removed=len(removed), **score(removed & scored_ids, truth))
            return r

        wall, kb, p = timed([py, "-c", FLOOR, data], env)
        rows.append(row("floor: read + Fingerprinter().many", wall, kb, p.cpu, None))  # type: ignore[attr-defined]
        out, log = os.path.join(tmp, "out.jsonl"), os.path.join(tmp, "removed.jsonl")
        wall, kb, p = timed([py, "-m", "simdb.cli", "dedup", data, "-o", out, "--removed", log, "-q"], env)
        rows.append(row("simdb dedup (in memory)", wall, kb, p.cpu, set(_removed_log(log))))  # type: ignore[attr-defined]
        with open(out, encoding="utf-8") as fh:
            kept_out = sum(1 for _ in fh)
        if kept_out != rows[-1]["kept"]:
            raise SystemExit(f"simdb dedup wrote {kept_out} records but logged {rows[-1]['removed']} removals")
        tools = [("rensa 16x8 (RMinHashLSH)", "rensa", "lsh:16"),
                 ("rensa default bands (RMinHashDeduplicator)", "rensa", "dedup")]
        if args.with_datasketch:
            tools.append(("datasketch MinHashLSH (128 perms)", "datasketch", "datasketch"))
        missing = sorted({mod for _, mod, _ in tools if not _has(mod, extra)})
        if missing:
            print(f"skipped {', '.join(missing)}: pip install rensa datasketch (and --extra-path DIR "
                  f"for a --target install)", file=sys.stderr)
        for name, mod, mode in tools:
            if mod in missing:
                continue
            log = os.path.join(tmp, f"removed-{mode.replace(':', '')}.jsonl")
            wall, kb, p = timed([py, "-c", MINHASH, data, log, mode] + extra, env)
            rows.append(row(name, wall, kb, p.cpu, set(_removed_log(log))))  # type: ignore[attr-defined]
    by = {r["contender"]: r for r in rows}
    simdb, floor = by["simdb dedup (in memory)"], by["floor: read + Fingerprinter().many"]
    rensa = by.get("rensa 16x8 (RMinHashLSH)")
    result: dict[str, Any] = {"data": info, "cpus": os.cpu_count(), "threshold": THRESHOLD, "exact": exact,
              "truth_check": checked, "results": rows,
              "simdb_vs_floor": {k: round(simdb[k] / max(floor[k], 0.01), 2) for k in ("seconds", "cpu_s")},
              "simdb_vs_rensa_16x8": {k: round(simdb[k] / max(rensa[k], 0.01), 2) for k in ("seconds", "cpu_s")}
              if rensa else None,
              "command": "benchmarks/bench_dedup_tools.py " + " ".join(sys.argv[1:])}
    print(table(rows, exact))
    for other in ("floor", "rensa_16x8"):
        ratio = result[f"simdb_vs_{other}"]
        if ratio:
            print(f"simdb / {other}: {ratio['seconds']}x wall, {ratio['cpu_s']}x CPU")
    print(json.dumps(result))
    with open(os.path.join(ROOT, "benchmarks", "results", "dedup_tools.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(result) + "\n")


def table(rows: list[dict], exact: dict) -> str:
    head = f"{'contender':44} {'s':>8} {'cpu s':>7} {'MB':>6} {'kept':>8} {'removed':>8} {'missed':>14} {'extra':>14}"
    lines = [head, "-" * len(head)]
    for r in rows:
        acc = ["", ""] if "kept" not in r else [f"{r['missed']} ({r['missed_pct']}%)", f"{r['extra']} ({r['extra_pct']}%)"]
        lines.append(f"{r['contender']:44} {r['seconds']:8.2f} {r['cpu_s']:7.1f} {r['peak_rss_mb']:6d} "
                     f"{r.get('kept', ''):>8} {r.get('removed', ''):>8} {acc[0]:>14} {acc[1]:>14}")
    scope = ("all records" if exact["scored_records"] == rows[0]["records"] else
             f"the {exact['scored_records']} records scored (a uniform sample; the rule removes "
             f"~{exact['removed_estimate']} of all {rows[0]['records']})")
    lines.append(f"missed / extra: removals the exact rule makes that the tool does not / the reverse, on {scope}; "
                 f"% of the exact rule's {exact['removed']} removals there")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
