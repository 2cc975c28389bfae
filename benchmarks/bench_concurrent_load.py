"""Concurrent bulk loads (add_many) before and after issue 15's locking (simdb.store.bulk).

Three scenarios, each on a fresh database of one server:

- ``different``: ``--writers`` threads, each ``add_many`` of ``--rows`` fingerprints into
  its own new collection, all started at once (the case that deadlocked).
- ``same``: the same writers into one collection (they serialise on the collection).
- ``reader``: one collection of ``--rows`` rows exists; while the ``different`` loads
  run, a reader repeats ``near()`` on it: its worst and 99th-percentile latency show
  whether a load stalls other collections.

Reported per scenario: rows/s over the wall time of all loads, and how many loads
failed (e.g. ``DeadlockDetected``). Compare two trees in the same run, e.g.::

    flock /tmp/simdb-bench.lock .venv/bin/python benchmarks/bench_concurrent_load.py --label after
    PYTHONPATH=/work/main flock /tmp/simdb-bench.lock .venv/bin/python \
        benchmarks/bench_concurrent_load.py --label before --url <the same server's URL>

Uses ``--url`` (a superuser URL, for CREATE DATABASE) or else starts a private
embedded server in a temporary directory.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time
import uuid
from pathlib import Path


def _database(server_url: str) -> str:
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = "bench_load_" + uuid.uuid4().hex[:8]
    admin = create_engine(server_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def _items(n: int, seed: int, prefix: str):
    rng = random.Random(seed)
    return ({"key": f"{prefix}{i}", "fp": rng.getrandbits(64)} for i in range(n))


def _run_loads(url: str, collections: list[str], rows: int) -> tuple[float, list[str]]:
    from simdb import SimhashIndex

    errors: list[str] = []
    barrier = threading.Barrier(len(collections))

    def work(j: int, name: str) -> None:
        try:
            with SimhashIndex(url, name) as ix:
                barrier.wait()
                ix.add_many(_items(rows, j, f"w{j}-"))
        except Exception as exc:  # noqa: BLE001 - counted
            errors.append(type(exc).__name__)

    threads = [threading.Thread(target=work, args=(j, c)) for j, c in enumerate(collections)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0, errors


def scenario(server_url: str, kind: str, writers: int, rows: int) -> dict:
    from simdb import SimhashIndex

    url = _database(server_url)
    out: dict = {"scenario": kind, "writers": writers, "rows_per_writer": rows}
    if kind == "different":
        secs, errors = _run_loads(url, [f"c{j}" for j in range(writers)], rows)
    elif kind == "same":
        secs, errors = _run_loads(url, ["shared"] * writers, rows)
    else:
        with SimhashIndex(url, "established") as ix:
            ix.add_many(_items(rows, 999, "e"))
            probe = ix.get("e7").fp
        latencies: list[float] = []
        stop = threading.Event()

        def reader() -> None:
            with SimhashIndex(url, "established") as ix:
                while not stop.is_set():
                    t = time.perf_counter()
                    ix.near(probe, k=3)
                    latencies.append(time.perf_counter() - t)
                    time.sleep(0.01)

        rt = threading.Thread(target=reader)
        rt.start()
        secs, errors = _run_loads(url, [f"c{j}" for j in range(writers)], rows)
        stop.set()
        rt.join()
        latencies.sort()
        out["reader_queries"] = len(latencies)
        out["reader_max_ms"] = round(1000 * latencies[-1], 1) if latencies else None
        out["reader_p99_ms"] = round(1000 * latencies[int(0.99 * (len(latencies) - 1))], 1) if latencies else None
    out["seconds"] = round(secs, 2)
    out["failed_loads"] = len(errors)
    out["errors"] = sorted(set(errors))
    out["rows_per_s"] = round((writers - len(errors)) * rows / secs) if secs else None
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--url", help="SQLAlchemy URL of a PostgreSQL server (superuser)")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--rows", type=int, default=250_000, help="rows per writer (default: above BULK_MIN_ROWS)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--label", default="")
    ap.add_argument("--scenarios", default="different,same,reader")
    args = ap.parse_args()
    server = None
    url = args.url
    if url is None:
        from simdb.embedded import start_server

        tmp = Path(tempfile.mkdtemp(prefix="simdb-bench-load-"))
        server = start_server(tmp / "pgdata", cleanup_mode="delete")
        url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
    import simdb

    try:
        for _ in range(args.rounds):
            for kind in args.scenarios.split(","):
                result = scenario(url, kind, args.writers, args.rows)
                result["label"] = args.label
                result["simdb"] = str(Path(simdb.__file__).parent)
                print(json.dumps(result), flush=True)
    finally:
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    main()
