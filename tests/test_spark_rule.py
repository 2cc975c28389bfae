"""Spark's pairs by the default rule (:func:`simdb.spark.rule_pairs`) are ``SimhashIndex.pairs()``'s for the
same texts (the planted collection of tests/planted_support.py), and ``keep_one`` fed with them keeps no
pair of the rule. Skipped where PySpark or a Java runtime is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid

import pytest

from tests.planted_support import pair_set, planted_texts

pytest.importorskip("pyspark")


def _java_ok() -> bool:
    java = shutil.which("java")
    if not java:
        return False
    try:
        return subprocess.run([java, "-version"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


if not _java_ok():  # pragma: no cover
    pytest.skip("no Java runtime for PySpark (run scripts/ensure-java.sh)", allow_module_level=True)

from simdb import SimhashIndex  # noqa: E402
from simdb import spark as sspark  # noqa: E402

TEXTS = planted_texts()


@pytest.fixture(scope="module")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = sspark.session("local[2]", "simdb-rule-tests", {"spark.sql.shuffle.partitions": "2",
                                                              "spark.driver.memory": "1g"})
    yield session
    session.stop()


def test_rule_pairs_are_the_collection_pairs_and_keep_one_keeps_none(spark, database_url):
    texts = {**TEXTS, "no-words": "!!! ???"}
    with SimhashIndex(database_url, f"spark-rule-{uuid.uuid4().hex[:8]}") as index:
        for key, value in texts.items():
            index.add(key, value)
        expected = {(p.key_a, p.key_b): (p.distance, round(p.jaccard, 9)) for p in index.pairs()}
        hamming = pair_set((p.key_a, p.key_b) for p in index.pairs(verify=False))
        index.drop()
    df = spark.createDataFrame(list(texts.items()), "id string, text string")
    pairs_df = sspark.rule_pairs(df).cache()
    got = {frozenset((r["id_a"], r["id_b"])): (r["distance"], round(r["jaccard"], 9)) for r in pairs_df.collect()}
    assert got == {frozenset(k): v for k, v in expected.items()} and got
    assert set(got) != hamming  # the Hamming pairs are another answer on these texts
    order = spark.createDataFrame([(k, i) for i, k in enumerate(texts)], "id string, pos int")
    kept, removed = sspark.keep_one(df.join(order, "id"), pairs_df, order_col="pos")
    kept_ids = {r["id"] for r in kept.collect()}
    assert not {p for p in got if p <= kept_ids}
    assert {frozenset((r["removed"], r["kept"])) for r in removed.collect()} <= set(got)
