"""``simdb dedup`` of English paragraphs (JSONL) vs ``Fingerprinter.many`` on the same texts.

Run (one benchmark at a time on a shared machine)::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_dedup.py --records 100000

Data: paragraph-sized English texts made from the docstrings of ``benchmarks/corpus.py``,
of which ``--dup-share`` are planted near-duplicates (a copy of an earlier record with
0-2 words replaced), shuffled into the stream. Written once as JSONL. Two ways to make the
distinct records (``--data``):

- ``sentences``: six sentences drawn at random from the corpus's ~24,000
  distinct sentences (~110 words). Two records share a sentence about 0.15 % of the time,
  as unrelated paragraphs of a real collection rarely share text: the candidates a record
  meets do not grow with the collection unless it holds near-duplicates.
- ``halves`` (the default, as for every figure before 2026-11-26): the first half of one docstring + the second half of another. With ~5,200
  docstrings, every half recurs in ~N/5,200 records, so at 1M records each record shares
  half its text (Jaccard ~0.33) with ~400 others: a collection of templated texts, where the
  band candidates (true LSH collisions at J ~0.33, about 5 % each) grow with N. Kept as the
  adversarial case and for comparison with earlier figures.

Measured, each in its own process (``/usr/bin/time``: wall time and peak RSS):

- baseline: read the JSONL and ``Fingerprinter().many(texts)`` (the floor of any dedup
  that fingerprints every text once);
- ``simdb dedup IN -o OUT --removed LOG``: in memory since the dedup without a collection stopped using
  one (an embedded server is started before, in a fresh ``SIMDB_HOME``, for a ``--compare-with`` tree that
  still dedups in a temporary collection; the server's own memory is not in the client's peak RSS).

Also the CPU seconds of the client and of the server for each dedup (Linux ``/proc``): on a shared
machine wall time counts the neighbours' work too. Prints one JSON line per contender (also appended to benchmarks/results/dedup.jsonl)
and the ratio dedup / baseline measured in the same run, and the curve of records/s per
``--window`` records read (from ``simdb dedup --progress``: the rate must not fall as the
collection grows). ``--compare-with TREE`` runs the same dedup a second time with the simdb of
another source tree (e.g. a checkout of the code before band keys) in its own server, and says
whether the two kept the same records and logged the same removals.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from benchmarks.corpus import english_pieces, sentence_paragraph  # noqa: E402

BASELINE = """
import json, sys, time
from simdb import Fingerprinter
t0 = time.perf_counter()
texts = [json.loads(line)["text"] for line in open(sys.argv[1], encoding="utf-8")]
fps = Fingerprinter().many(texts)
print(json.dumps({"records": len(texts), "seconds": time.perf_counter() - t0}))
"""


def make_data(path: str, n: int, dup_share: float, seed: int, data: str = "halves") -> dict:
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
                if data == "sentences":
                    text = sentence_paragraph(rng)
                else:
                    a, b = rng.choice(pieces), rng.choice(pieces)
                    text = " ".join(a[: len(a) // 2] + b[len(b) // 2:])
                if len(made) < 200_000:
                    made.append(text)
            fh.write(json.dumps({"id": f"p{i}", "text": text, "source": "bench"}) + "\n")
    return {"records": n, "data": data, "planted_near_duplicates": planted, "bytes": os.path.getsize(path)}


#: where the measured commands start: not a source tree, whose ``simdb`` package ``python -m`` and ``-c``
#: would import first, ahead of ``PYTHONPATH`` (``--compare-with`` ran this tree's code twice so)
NEUTRAL_CWD = tempfile.gettempdir()


def timed(cmd: list[str], env: dict) -> tuple[float, int, subprocess.CompletedProcess]:
    """Wall seconds and peak RSS (kB) of ``cmd`` via /usr/bin/time (its CPU seconds: ``p.cpu``)."""
    t0 = time.perf_counter()
    p = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, capture_output=True, text=True, env=env,
                       cwd=NEUTRAL_CWD)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    peak, user, system = p.stderr.strip().splitlines()[-1].split()
    p.cpu = float(user) + float(system)  # type: ignore[attr-defined]
    return wall, int(peak), p


def _proc_cpu(pid: int, dead_children: bool) -> float:
    fields = open(f"/proc/{pid}/stat", encoding="ascii").read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15 if dead_children else 13]) / os.sysconf("SC_CLK_TCK")


def server_cpu(home: str) -> float | None:
    """CPU seconds the embedded server has used so far (Linux): the postmaster, its live processes
    and its finished backends. Why: on a shared machine wall time measures the neighbours too; the
    CPU seconds of the client and the server are the work a dedup did."""
    try:
        with open(os.path.join(home, "pgdata", "postmaster.pid"), encoding="ascii") as fh:
            pid = int(fh.readline())
        with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
            children = [int(c) for c in fh.read().split()]
        total = _proc_cpu(pid, True)
        for child in children:
            try:
                total += _proc_cpu(child, False)
            except OSError:  # ended meanwhile: now in the postmaster's dead-children figure
                pass
        return total
    except (OSError, ValueError):
        return None


_PROGRESS = re.compile(r"dedup ([\d,]+) records .*?([\d.]+)s")


def curve(stderr: str, window: int) -> list[dict]:
    """Records/s per ``window`` records read, from the progress lines (records read, seconds)."""
    points = [(int(m.group(1).replace(",", "")), float(m.group(2))) for m in _PROGRESS.finditer(stderr)]
    out = []
    last_n, last_t = 0, 0.0
    for n, t in points:
        if n >= last_n + window:
            out.append({"records": n, "records_per_s": round((n - last_n) / max(t - last_t, 1e-9))})
            last_n, last_t = n, t
    return out


def _read(tmp: str, name: str) -> list[str]:
    """A run's output lines, sorted (the kept records / the removal log: compared between two trees)."""
    with open(os.path.join(tmp, name), encoding="utf-8") as fh:
        return sorted(fh)


def run_dedup(simdb: list[str], data: str, tmp: str, tag: str, env: dict, keep: str) -> tuple[float, int, dict, str]:
    env = dict(env)
    env["SIMDB_HOME"] = os.path.join(tmp, "home-" + tag)
    subprocess.run(simdb + ["url", "-q"], env=env, check=True, capture_output=True, cwd=NEUTRAL_CWD)  # start + migrate
    try:
        cmd = simdb + ["dedup", data, "-o", os.path.join(tmp, f"out-{tag}.jsonl"), "--removed",
                       os.path.join(tmp, f"removed-{tag}.jsonl"), "--keep", keep, "--json", "--progress"]
        before = server_cpu(env["SIMDB_HOME"])
        wall, kb, p = timed(cmd, env)
        time.sleep(1)  # the run's backends exit after it
        after = server_cpu(env["SIMDB_HOME"])
        summary = json.loads(p.stdout)
        summary["cpu_s"] = {"client": round(p.cpu, 1),  # type: ignore[attr-defined]
                            "server": None if before is None or after is None else round(after - before, 1)}
        return wall, kb, summary, p.stderr
    finally:
        subprocess.run(simdb + ["server", "stop"], env=env, capture_output=True, cwd=NEUTRAL_CWD)


def _check_tree(py: str, env: dict, tree: str) -> None:
    """Refuse a comparison that would run this tree's code twice: an interpreter with simdb installed in
    editable mode imports it ahead of ``PYTHONPATH``. Run the benchmark with one that has simdb's
    dependencies but not simdb (a venv whose ``.pth`` names the project venv's site-packages), and make
    the other tree's ``simdb.migrations`` importable (a ``simdb/migrations -> ../migrations`` link)."""
    where = subprocess.run([py, "-c", "import simdb, simdb.migrations; print(simdb.__file__)"], env=env,
                           capture_output=True, text=True, cwd=NEUTRAL_CWD)
    if where.returncode != 0 or not os.path.realpath(where.stdout.strip()).startswith(os.path.realpath(tree)):
        raise SystemExit(f"--compare-with {tree}: this interpreter imports simdb from "
                         f"{where.stdout.strip() or where.stderr.strip()[-300:]}, not from {tree}: {_check_tree.__doc__}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--dup-share", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", choices=("halves", "sentences"), default="halves",
                    help="how distinct records are made (see the module docstring)")
    ap.add_argument("--keep", default="first")
    ap.add_argument("--window", type=int, default=100_000, help="records per point of the records/s curve")
    ap.add_argument("--compare-with", metavar="TREE", help="also run the dedup with the simdb of this source tree")
    ap.add_argument("--repeat", type=int, default=1,
                    help="with --compare-with: run the two dedups, one after the other, this many times")
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="simdb-bench-dedup-") as tmp:
        data = os.path.join(tmp, "paragraphs.jsonl")
        info = make_data(data, args.records, args.dup_share, args.seed, args.data)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SIMDB_")}
        env["PYTHONPATH"] = ROOT  # this tree's simdb, whatever the virtualenv installed
        base_wall, base_kb, p = timed([py, "-c", BASELINE, data], env)
        simdb = [py, "-m", "simdb.cli"]
        wall, kb, summary, err = run_dedup(simdb, data, tmp, "this", env, args.keep)
        other = None
        repeats: list[dict] = []
        if args.compare_with:
            env_o = dict(env, PYTHONPATH=os.path.abspath(args.compare_with))
            _check_tree(py, env_o, args.compare_with)
            other = run_dedup(simdb, data, tmp, "other", env_o, args.keep)
            same = {name: _read(tmp, f"{name}-this.jsonl") == _read(tmp, f"{name}-other.jsonl")
                    for name in ("out", "removed")}
            for _ in range(args.repeat - 1):  # alternated: a busy spell of the machine hits both
                again = [run_dedup(simdb, data, tmp, "this", env, args.keep),
                         run_dedup(simdb, data, tmp, "other", env_o, args.keep)]
                repeats.append({tag: {"seconds": round(r[0], 2), "cpu_s": r[2]["cpu_s"]}
                                for tag, r in zip(("this", "other"), again)})
    n = args.records
    rows = [
        {"contender": "Fingerprinter.many (read JSONL + fingerprint)", "records": n,
         "seconds": round(base_wall, 2), "records_per_s": round(n / base_wall), "peak_rss_mb": round(base_kb / 1024),
         "cpu_s": round(p.cpu, 1)},  # type: ignore[attr-defined]
        {"contender": f"simdb dedup --keep {args.keep} (this tree: in memory, no collection)", "records": n,
         "seconds": round(wall, 2), "records_per_s": round(n / wall), "peak_rss_mb": round(kb / 1024),
         "kept": summary["kept"], "removed": summary["removed"], "cpu_s": summary["cpu_s"]},
    ]
    rows[1]["records_per_s_curve"] = curve(err, args.window)
    if other is not None:
        rows.append({"contender": f"simdb dedup --keep {args.keep} with {args.compare_with}", "records": n,
                     "seconds": round(other[0], 2), "records_per_s": round(n / other[0]),
                     "peak_rss_mb": round(other[1] / 1024), "kept": other[2]["kept"], "removed": other[2]["removed"],
                     "cpu_s": other[2]["cpu_s"],
                     "records_per_s_curve": curve(other[3], args.window),
                     "same_kept_records": same["out"], "same_removal_log": same["removed"]})
    if repeats:
        rows.append({"contender": "the two dedups again, alternated (this tree, then the other)", "runs": repeats})
    out = {"data": info, "cpus": os.cpu_count(), "results": rows,
           "dedup_vs_fingerprint_time": round(wall / base_wall, 2),
           "command": "benchmarks/bench_dedup.py " + " ".join(sys.argv[1:])}
    print(json.dumps(out, indent=2))
    with open(os.path.join(ROOT, "benchmarks", "results", "dedup.jsonl"), "a", encoding="utf-8") as fh:
        fh.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
