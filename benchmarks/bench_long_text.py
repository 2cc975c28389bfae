"""Peak memory of fingerprinting one long text (issue 15, item 4): piecewise vs one-shot.

Each measurement runs in a fresh child process and reports its peak RSS
(``ru_maxrss``) for:

- ``text only``: building the text (the floor every mode pays);
- ``piecewise``: ``Fingerprinter().fingerprint(text)`` as shipped (simdb.core.fingerprint.long_texts:
  whitespace-cut pieces, majority over distinct hashes with counts);
- ``one-shot``: the same call with the piecewise thresholds disabled, i.e. the
  previous code path (a 64-byte bit row, and a float32 copy, per occurrence).

Both give the same fingerprint (checked). Example::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_long_text.py --mb 200
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

CHILD = r"""
import json, random, resource, sys, time
mb, mode, vocab = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10))) for _ in range(vocab)]
parts, size = [], 0
while size < mb * 1_000_000:
    chunk = " ".join(rng.choices(words, k=20_000)) + "\n"
    parts.append(chunk)
    size += len(chunk)
text = "".join(parts)
del parts
import simdb.core.fingerprint.long_texts as lt
from simdb.core.fingerprint import Fingerprinter
fp = None
t0 = time.perf_counter()
if mode != "text":
    if mode == "one-shot":
        lt.SEGMENT_CHARS = lt.LARGE = 1 << 62
    fp = Fingerprinter().fingerprint(text)
secs = time.perf_counter() - t0
print(json.dumps({"fp": fp, "seconds": round(secs, 2), "chars": len(text),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}))
"""


def measure(mb: int, mode: str, vocab: int) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(mb), mode, str(vocab)], check=False, capture_output=True, text=True)
    if out.returncode != 0:
        return {"mode": mode, "error": out.stderr.strip().splitlines()[-1:]}
    result = json.loads(out.stdout)
    result["mode"] = mode
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--mb", type=int, default=200, help="text size in MB (default 200)")
    ap.add_argument("--vocab", type=int, default=50_000, help="distinct words (default 50,000)")
    ap.add_argument("--modes", default="text,piecewise,one-shot")
    args = ap.parse_args()
    results = [measure(args.mb, mode, args.vocab) for mode in args.modes.split(",")]
    fps = {r.get("fp") for r in results if r.get("mode") != "text" and "fp" in r}
    for r in results:
        r["mb"] = args.mb
        print(json.dumps(r), flush=True)
    if len(fps) > 1:
        raise SystemExit(f"fingerprints differ: {fps}")


if __name__ == "__main__":
    t = time.perf_counter()
    main()
    print(json.dumps({"total_seconds": round(time.perf_counter() - t, 1), "maxrss_children_mb":
                      round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)}))
