"""The SQL functions of the rule against the API: ``SELECT count(*) FROM simdb_pairs(c)`` and
``simdb_near_key`` against ``SimhashIndex.pairs()``, on N random word texts of which every tenth is a
one-word edit of an earlier one, in a private embedded server (two rounds).

    python benchmarks/bench_sql_rule.py 20000
"""

import random
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import create_engine, text

from simdb import SimhashIndex
from simdb.embedded import start_server
from simdb.store.migrate import migrate

n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
rng = random.Random(5)
words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) for _ in range(5000)]
texts = []
for i in range(n):
    if i % 10 == 9:
        base = texts[rng.randrange(len(texts))].split()
        base[rng.randrange(len(base))] = rng.choice(words)
        texts.append(" ".join(base))
    else:
        texts.append(" ".join(rng.choice(words) for _ in range(rng.randint(20, 120))))
server = start_server(Path(tempfile.mkdtemp(prefix="hsurf-pg-")) / "pgdata", cleanup_mode="delete")
url = server.get_uri().replace("postgresql://", "postgresql+psycopg://", 1)
try:
    migrate(url)
    with SimhashIndex(url, "m") as ix:
        t = time.perf_counter()
        ix.add_many((f"k{i}", x) for i, x in enumerate(texts))
        print(f"load {time.perf_counter() - t:.1f} s")
        ix.refresh_stats()
        for _ in range(2):
            t = time.perf_counter()
            api = sum(1 for _ in ix.pairs())
            ta = time.perf_counter() - t
            eng = create_engine(url)
            with eng.connect() as c:
                t = time.perf_counter()
                sql = c.execute(text("SELECT count(*) FROM simdb_pairs('m')")).scalar()
                ts = time.perf_counter() - t
                t = time.perf_counter()
                c.execute(text("SELECT count(*) FROM simdb_near_key('m', 'k9')")).scalar()
                tk = time.perf_counter() - t
            eng.dispose()
            print(f"N={n:,}: pairs() {api:,} pairs in {ta:.2f} s; simdb_pairs {sql:,} in {ts:.2f} s; "
                  f"simdb_near_key 1 key {tk * 1000:.1f} ms")
finally:
    server.cleanup()
