"""``simdb dedup`` of English paragraphs (JSONL) vs ``Fingerprinter.many`` on the same texts.

Run (one benchmark at a time on a shared machine)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_dedup.py --records 100000

Data: paragraph-sized English texts made from the docstrings of ``benchmarks/corpus.py``
(first half of one docstring + second half of another: distinct texts of ~110 words),
of which ``--dup-share`` are planted near-duplicates (a copy of an earlier record with
0-2 words replaced), shuffled into the stream. Written once as JSONL.

Measured, each in its own process (``/usr/bin/time``: wall time and peak RSS):

- baseline: read the JSONL and ``Fingerprinter().many(texts)`` (the floor of any dedup
  that fingerprints every text once);
- ``simdb dedup IN -o OUT --removed LOG`` on the embedded server (started before, in a
  fresh ``SIMDB_HOME``; the server's own memory is not in the client's peak RSS).

Prints one JSON line per contender (also appended to benchmarks/results/dedup.jsonl)
and the ratio dedup / baseline measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.corpus import english_pieces  # noqa: E402

BASELINE = """
import json, sys, time
from simdb import Fingerprinter
t0 = time.perf_counter()
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
fps = Fingerprinter().many(texts)
print(json.dumps({"records": len(texts), "seconds": time.perf_counter() - t0}))
"""


def make_data(path: str, n: int, dup_share: float, seed: int) -> dict:
    rng = random.Random(seed)
    pieces = [p.split() for p in english_pieces()]
    vocab = sorted({w for p in pieces[:500] for w in p})
    made: list[str] = []
    planted = 0
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            if made and rng.random() < dup_share:
                words = rng.choice(made).split()
                for _ in range(rng.choice([0, 1, 2])):
                    words[rng.randrange(len(words))] = rng.choice(vocab)
                text = " ".join(words)
                planted += 1
            else:
                a, b = rng.choice(pieces), rng.choice(pieces)
                text = " ".join(a[: len(a) // 2] + b[len(b) // 2:])
                if len(made) < 200_000:
                    made.append(text)
            fh.write(json.dumps({"id": f"p{i}", "text": text, "source": "bench"}) + "\n")
    return {"records": n, "planted_near_duplicates": planted, "bytes": os.path.getsize(path)}


def timed(cmd: list[str], env: dict) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and peak RSS (kB) of ``cmd`` via /usr/bin/time."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    peak_kb = int(p.stderr.strip().splitlines()[-1])
    return wall, peak_kb, p


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--dup-share", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default="first")
    args = ap.parse_args()
    py = sys.executable
    simdb = [os.path.join(os.path.dirname(py), "simdb")]
    if not os.path.exists(simdb[0]):
        simdb = [py, "-m", "simdb.cli"]
    with tempfile.TemporaryDirectory(prefix="simdb-bench-dedup-") as tmp:
        data = os.path.join(tmp, "paragraphs.jsonl")
        info = make_data(data, args.records, args.dup_share, args.seed)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_")}
        env["SIMDB_HOME"] = os.path.join(tmp, "home")
        subprocess.run(simdb + ["url", "-q"], env=env, check=True, capture_output=True)  # start + migrate
        try:
            base_wall, base_kb, p = timed([py, "-c", BASELINE, data], env)
            cmd = simdb + ["dedup", data, "-o", os.path.join(tmp, "out.jsonl"), "--removed",
                           os.path.join(tmp, "removed.jsonl"), "--keep", args.keep, "--json"]
            wall, kb, p = timed(cmd, env)
            summary = json.loads(p.stdout)
        finally:
            subprocess.run(simdb + ["stop"], env=env, capture_output=True)
    n = args.records
    rows = [
        {"contender": "Fingerprinter.many (read JSONL + fingerprint)", "records": n,
         "seconds": round(base_wall, 2), "records_per_s": round(n / base_wall), "peak_rss_mb": round(base_kb / 1024)},
        {"contender": f"simdb dedup --keep {args.keep} (embedded server, temporary collection)", "records": n,
         "seconds": round(wall, 2), "records_per_s": round(n / wall), "peak_rss_mb": round(kb / 1024),
         "kept": summary["kept"], "removed": summary["removed"]},
    ]
    out = {"data": info, "cpus": os.cpu_count(), "results": rows,
           "dedup_vs_fingerprint_time": round(wall / base_wall, 2),
           "command": "benchmarks/bench_dedup.py " + " ".join(sys.argv[1:])}
    print(json.dumps(out, indent=2))
    with open(os.path.join(ROOT, "benchmarks", "results", "dedup.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
