"""AsyncSimhashIndex under concurrency: 100 concurrent ``near`` tasks vs one ``near_many`` of the
same queries, and how long the event loop is ever blocked.

Targets (issue 16): throughput of the concurrent ``near`` tasks >= 0.8x ``near_many``'s; no
event-loop stall above 5 ms. Both figures come from the same run (the machine is shared):
rounds alternate the two ways and the medians are compared. The stall is measured by a
watchdog task that sleeps 1 ms at a time and records how late it wakes, while the rounds run
(text queries included, so fingerprinting is part of it).

    .venv/bin/python benchmarks/bench_async.py --rows 100000 [--url postgresql://...]

Without --url an embedded PostgreSQL starts in a temporary directory. Appends one JSON line
to benchmarks/results/async.jsonl.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from simdb.aio import AsyncSimhashIndex  # noqa: E402

WORDS = ("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma "
         "tau upsilon phi chi psi omega river mountain table window garden market").split()


def _texts(rng: random.Random, n: int, words: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


class Watchdog:
    """Largest lateness of a 1 ms sleep on the loop: the longest the loop was blocked."""

    def __init__(self):
        self.lates: list[float] = []
        self._stop = False

    async def run(self):
        loop = asyncio.get_running_loop()
        while not self._stop:
            t = loop.time()
            await asyncio.sleep(0.001)
            self.lates.append(loop.time() - t - 0.001)

    def summary(self, prefix: str) -> dict:
        lates = sorted(self.lates) or [0.0]
        return {
            f"{prefix}_max_ms": lates[-1] * 1000,
            f"{prefix}_p99_ms": lates[int(0.99 * (len(lates) - 1))] * 1000,
            f"{prefix}_over_5ms": sum(x > 0.005 for x in lates),
            f"{prefix}_samples": len(lates),
        }

    def stop(self):
        self._stop = True


async def bench(url: str, rows: int, queries: int, rounds: int, k: int) -> dict:
    rng = random.Random(1)
    async with AsyncSimhashIndex(url, f"bench-async-{rows}", pool_size=4) as ix:
        if await ix.count() != rows:
            await ix.add_many(({"key": f"r{i}", "fp": rng.getrandbits(64)} for i in range(rows)), rebuild_indexes=None)
            # a collection of texts for the text-query rounds
        stored = [(await ix.near_many([rng.getrandbits(64)], k=0))]  # warm the pool and the plans
        del stored
        fps = [rng.getrandbits(64) for _ in range(queries)]
        texts = _texts(rng, queries - 5, 40) + _texts(rng, 5, 2000)  # 5 long texts: executor path
        dog = Watchdog()
        dog_task = asyncio.create_task(dog.run())
        t_start = time.perf_counter()
        t_near, t_many, t_near_text, t_many_text = [], [], [], []
        answers = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            a = await asyncio.gather(*(ix.near(q, k=k) for q in fps))
            t1 = time.perf_counter()
            b = await ix.near_many(fps, k=k)
            t2 = time.perf_counter()
            c = await asyncio.gather(*(ix.near(q, k=k) for q in texts))
            t3 = time.perf_counter()
            d = await ix.near_many(texts, k=k)
            t4 = time.perf_counter()
            answers.append((a, b, c, d))  # compared after the watchdog stops (harness work)
            t_near.append(t1 - t0)
            t_many.append(t2 - t1)
            t_near_text.append(t3 - t2)
            t_many_text.append(t4 - t3)
        dog.stop()
        await dog_task
        busy = time.perf_counter() - t_start
        # the noise floor of this machine: the same watchdog on an idle loop for as long
        idle = Watchdog()
        idle_task = asyncio.create_task(idle.run())
        await asyncio.sleep(busy)
        idle.stop()
        await idle_task
        assert all(a == b and c == d for a, b, c, d in answers), "near and near_many disagree"
    med = statistics.median
    return {
        "bench": "async",
        "rows": rows,
        "queries": queries,
        "k": k,
        "rounds": rounds,
        "near_concurrent_qps": queries / med(t_near),
        "near_many_qps": queries / med(t_many),
        "ratio_fp": med(t_many) / med(t_near),
        "near_concurrent_text_qps": queries / med(t_near_text),
        "near_many_text_qps": queries / med(t_many_text),
        "ratio_text": med(t_many_text) / med(t_near_text),
        **dog.summary("loop_late_busy"),
        **idle.summary("loop_late_idle"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("-k", type=int, default=3)
    ap.add_argument("--url", help="PostgreSQL URL (default: an embedded server in a temporary directory)")
    args = ap.parse_args()
    server = None
    url = args.url
    if url is None:
        from simdb.embedded import start_server

        server = start_server(Path(tempfile.mkdtemp(prefix="simdb-bench-async-")) / "pgdata", cleanup_mode="delete")
        url = server.get_uri()
    try:
        result = asyncio.run(bench(url, args.rows, args.queries, args.rounds, args.k))
    finally:
        if server is not None:
            server.cleanup()
    print(json.dumps(result, indent=2))
    out = ROOT / "benchmarks" / "results" / "async.jsonl"
    with out.open("a") as f:
        f.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
