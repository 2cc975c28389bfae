"""COPY's binary format as simdb writes it (:mod:`simdb.store.encode`): whatever the
key, fingerprint, meta and sketch, PostgreSQL reads back exactly the values encoded."""

from __future__ import annotations

import json

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy.engine import make_url

from simdb.core.sketch.compare import SketchRows
from simdb.store import encode as CB

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=40)
_meta = st.none() | st.dictionaries(_text, st.integers(-(2**53), 2**53) | _text | st.booleans(), max_size=3)
_row = st.tuples(
    _text,
    st.none() | st.integers(-(2**63), 2**63 - 1),
    _meta,
    st.lists(st.integers(-(2**31), 2**31 - 1), max_size=50, unique=True).map(sorted),
)


@pytest.fixture(scope="module")
def conn(database_url):
    url = make_url(database_url).set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE TEMP TABLE copy_rt ({CB.STAGE_COLUMNS})")
        yield c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_row, max_size=12))
def test_rows_read_back_exactly(conn, rows):
    sketches = SketchRows.from_arrays([np.array(r[3], dtype=np.int32) if r[3] else None for r in rows])
    data = CB.encode_rows(
        [r[0] for r in rows],
        [r[1] for r in rows],
        [None if r[2] is None else json.dumps(r[2], ensure_ascii=False) for r in rows],
        CB.sketch_fields(sketches),
        [None] * len(rows),
        [None] * len(rows),
    )
    conn.execute("TRUNCATE copy_rt")
    with conn.cursor().copy(f"COPY copy_rt FROM STDIN ({CB.COPY_OPTIONS})") as cp:
        cp.write(CB.HEADER)
        cp.write(data)
        cp.write(CB.TRAILER)
    got = conn.execute("SELECT key, fp, meta, shingles FROM copy_rt ORDER BY ctid").fetchall()
    # an empty sketch is stored as NULL: nothing to verify with
    assert got == [(k, fp, meta, sk or None) for k, fp, meta, sk in rows]


def test_an_empty_load_is_just_the_header_and_trailer(conn):
    conn.execute("TRUNCATE copy_rt")
    with conn.cursor().copy(f"COPY copy_rt FROM STDIN ({CB.COPY_OPTIONS})") as cp:
        cp.write(CB.HEADER + CB.encode_rows([], [], [], [], [], []) + CB.TRAILER)
    assert conn.execute("SELECT count(*) FROM copy_rt").fetchone()[0] == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40, unique=True).map(sorted), max_size=10),
    st.integers(1, 48),
    st.randoms(use_true_random=False),
)
def test_decode_sketches_reads_array_send(conn, sketches, size, rnd):
    """decode_sketches of PostgreSQL's own array_send bytes, rows in any order, some ids absent,
    empty arrays among them: each id's sketch, cut at ``size``."""
    ids = np.arange(0, 3 * len(sketches), 3, dtype=np.int64)  # sorted ids; every third id exists
    got = [(int(i), sk) for i, sk in zip(ids.tolist(), sketches)]
    rnd.shuffle(got)
    keep = [g for g in got if rnd.random() < 0.8]
    blobs = [conn.execute("SELECT array_send(%s::int4[])", (sk,), binary=True).fetchone()[0] for _, sk in keep]
    rows = CB.decode_sketches(ids, [i for i, _ in keep], blobs, size)
    want = {i: sk[:size] for i, sk in keep}
    assert [rows.row(r).tolist() for r in range(len(ids))] == [want.get(int(i), []) for i in ids]
