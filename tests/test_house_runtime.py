"""One way through the house at run time (issue 28), checked on the source and on a traced call.

Static (an AST walk, the logic of ``../shared/tools/house_runtime.py``): no function in
``simdb/store`` takes the facade (a parameter named ``index`` or annotated ``SimhashIndex``) or
imports it; no SQL statement on simdb's tables is written outside ``simdb/store`` and the
migrations. At run time: one ``near(text)`` on a verified collection, traced with
``sys.setprofile``, takes one route (issue 42): the facade checks its arguments and makes one call to
the collection's rule (:mod:`simdb.index.rules`), which reaches the store's candidate stage; in at most
``NEAR_ROOMS`` rooms (packages of the layout), each module entered by at most ``MAX_ENTRIES`` distinct
calls, never a call up a layer, ``k`` checked once; a verified ``add`` tokenizes its text once.
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys
import uuid
from collections import Counter
from collections.abc import Callable

from simdb.index import SimhashIndex

ROOT = pathlib.Path(__file__).resolve().parent.parent
PKG = ROOT / "simdb"

#: the facade's modules, which nothing in simdb/store may import
FACADE = ("simdb.index", "simdb.index.duplicates", "simdb.index.reservation", "simdb.index.rules",
          "simdb.aio")
#: the rooms (packages of the layout: docs/architecture.md) one near(text) on a (banded) verified
#: collection passes through, simdb.errors and simdb.results left out: the facade (simdb.index), the
#: pure core's argument checks, fingerprint and sketch, and the store. Issue 28 asks for <= 6.
NEAR_ROOMS = 6
#: the most distinct calls by which one module may be entered from others in a walked operation (issue 42:
#: a route a newcomer can follow enters each module once or twice, not through a row of forwarders)
MAX_ENTRIES = 3
#: the layers, low to high (../shared/tools/walk.py's): a call goes down or across, never up
LAYERS = [("simdb.errors", 0), ("simdb.util", 1), ("simdb.core", 2), ("simdb.results", 3), ("simdb.embedded", 4),
          ("simdb.store", 5), ("simdb.database", 6), ("simdb.index", 7), ("simdb.aio", 8)]


def layer(module: str) -> int:
    return next((rank for prefix, rank in LAYERS if module == prefix or module.startswith(prefix + ".")), -1)


def room(module: str) -> str:
    """The package of the layout a module lives in: simdb.core.fingerprint and simdb.core.sketch are
    rooms of their own inside the core; elsewhere the first package below simdb."""
    parts = module.split(".")
    if parts[1:2] == ["core"] and len(parts) > 3:
        return ".".join(parts[:3])
    return ".".join(parts[:2])
_SQL = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY)\b[\s\S]*\bsimdb_\w+", re.I)
#: an f-string statement naming simdb's tables through the store's constants ({FINGERPRINTS}, {_sql.COLLECTIONS})
_SQL_NAMED = re.compile(r"\b(SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM|COPY)\b[\s\S]*\{[\w.]*(FINGERPRINTS|COLLECTIONS)\}", re.I)


def _rendered(n: ast.JoinedStr) -> str:
    """An f-string with each replacement field as ``{its source}``: ``f"FROM {FINGERPRINTS}"`` -> ``FROM {FINGERPRINTS}``."""
    return "".join(v.value if isinstance(v, ast.Constant) else "{" + ast.unparse(v.value) + "}"  # type: ignore[attr-defined]
                   for v in n.values)


def _trees(paths):
    for p in paths:
        yield p, ast.parse(p.read_text(encoding="utf-8"))


def _facade_takers() -> list[str]:
    found = []
    for p, tree in _trees(sorted((PKG / "store").rglob("*.py"))):
        for n in ast.walk(tree):
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs:
                    ann = ast.unparse(a.annotation) if a.annotation is not None else ""
                    if a.arg == "index" or "SimhashIndex" in ann:
                        found.append(f"{p.relative_to(ROOT)}:{n.lineno} {n.name}({a.arg})")
            elif isinstance(n, ast.ImportFrom) and (n.module or "").startswith(FACADE):
                found.append(f"{p.relative_to(ROOT)}:{n.lineno} imports {n.module}")
            elif isinstance(n, ast.Import):
                found += [f"{p.relative_to(ROOT)}:{n.lineno} imports {a.name}" for a in n.names if a.name.startswith(FACADE)]
    return found


def _sql_outside_store() -> list[str]:
    found = []
    for p, tree in _trees(sorted(PKG.rglob("*.py"))):
        if p.relative_to(PKG).parts[0] in ("store", "migrations"):
            continue
        docs = {
            id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)
        }
        for n in ast.walk(tree):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs and _SQL.search(n.value):
                found.append(f"{p.relative_to(ROOT)}:{n.lineno}")
            elif isinstance(n, ast.JoinedStr) and (_SQL.search(_rendered(n)) or _SQL_NAMED.search(_rendered(n))):
                found.append(f"{p.relative_to(ROOT)}:{n.lineno}")
    return sorted(set(found))


#: the store's modules allowed SQLAlchemy SQL: migrate.py runs on Alembic's connection (a host's may be of
#: any driver), models.py declares the tables and their index expressions (DDL, not statements)
SQLALCHEMY_SQL_ALLOWED = {"migrate.py", "models.py"}


def _sqlalchemy_sql_in_store() -> list[str]:
    """Calls of SQLAlchemy's ``text()`` / ``exec_driver_sql`` in simdb/store: the other parameter style
    (``:name``) and the other connection layer, which issue 28 retires from the store."""
    found = []
    for p, tree in _trees(sorted((PKG / "store").rglob("*.py"))):
        if p.name in SQLALCHEMY_SQL_ALLOWED:
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call):
                name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                if name in ("text", "exec_driver_sql"):
                    found.append(f"{p.relative_to(ROOT)}:{n.lineno} {name}()")
    return sorted(found)


def test_the_store_runs_psycopg_sql_only():
    assert _sqlalchemy_sql_in_store() == []


def test_no_store_function_takes_or_imports_the_facade():
    assert _facade_takers() == []


def test_no_sql_statement_outside_the_store():
    assert _sql_outside_store() == []


def test_the_checks_see_what_they_look_for(tmp_path, monkeypatch):
    """The two checks find a store function taking the facade and a statement outside the store."""
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "bad.py").write_text("from simdb.index import SimhashIndex\ndef load(index, n): pass\n")
    (tmp_path / "spark.py").write_text('"""SELECT 1 FROM simdb_collections (a docstring)"""\n'
                                       'Q = "SELECT id FROM simdb_collections WHERE name = %s"\n'
                                       'R = f"DELETE FROM {_sql.FINGERPRINTS} WHERE collection_id = %s"\n'
                                       'S = f"SELECT {n} FROM host_table"\n')
    monkeypatch.setattr(sys.modules[__name__], "PKG", tmp_path)
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert len(_facade_takers()) == 2
    assert _sql_outside_store() == ["spark.py:2", "spark.py:3"]
    (tmp_path / "store" / "stats.py").write_text("def f(c): return c.execute(sa.text('SELECT 1')), c.exec_driver_sql('x')\n")
    assert _sqlalchemy_sql_in_store() == ["store/stats.py:1 exec_driver_sql()", "store/stats.py:1 text()"]


def _trace(call: Callable[[], object], cross: set | None = None) -> tuple[Counter, Counter]:
    """(calls per simdb module, calls per simdb function) made by ``call()``; ``cross`` gets the distinct
    calls from one simdb module into another: (caller module, callee module, callee function)."""
    modules: Counter = Counter()
    functions: Counter = Counter()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("simdb."):
                modules[name] += 1
                functions[f"{name}.{frame.f_code.co_name}"] += 1
                if cross is not None:
                    back = frame.f_back
                    while back is not None and not back.f_globals.get("__name__", "").startswith("simdb."):
                        back = back.f_back  # through numpy and the standard library, as walk.py does
                    caller = back.f_globals["__name__"] if back is not None else None
                    if caller is not None and caller != name:
                        cross.add((caller, name, frame.f_code.co_qualname))

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return modules, functions


TEXT = "I really enjoyed reading this article about database indexing and will try these ideas soon"


def test_near_on_a_verified_collection_takes_one_route(database_url, collection_name):
    with SimhashIndex(database_url, collection_name) as ix:
        assert ix.rule.name == "banded"  # the default: verified, band candidates
        ix.add("a", TEXT)
        ix.near(TEXT)  # warm: lazy set-up is not the walk
        cross: set = set()
        modules, functions = _trace(lambda: ix.near(TEXT.replace("article", "artcile")), cross)
    walked = sorted(set(modules) - {"simdb.errors", "simdb.results"})
    assert "simdb.index.rules" in walked and "simdb.store.candidates" in walked  # facade -> rule -> store
    into_rule = [c for c in cross if c[1] == "simdb.index.rules"]
    assert [c[2] for c in into_rule] == ["HammingRule.near"], into_rule  # one call from the facade, no forwarders
    entries = Counter(callee for _, callee, _ in cross if not callee.startswith(("simdb.errors", "simdb.results")))
    assert max(entries.values()) <= MAX_ENTRIES, entries
    up = [c for c in cross if layer(c[1]) > layer(c[0])]
    assert not up, up
    print(f"near(text): {len(walked)} modules, {len(cross)} cross-module calls")
    rooms = list(dict.fromkeys(room(m) for m in modules if room(m) not in ("simdb.errors", "simdb.results")))
    print("near(text) rooms, in order of first visit:", rooms, f"({len(walked)} modules)")
    assert rooms[0] == "simdb.index" and "simdb.store" in rooms, rooms  # the facade first, the store below
    assert len(rooms) <= NEAR_ROOMS, rooms
    # k is checked once a query (by the rule's argument rules), never again below it
    assert functions["simdb.core.validate.check_k"] == 1


def test_the_other_searches_take_one_route_too(database_url, collection_name):
    """near_key and near_many: the same route rules as near(text) (the rule answers, k checked once)."""
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add_many([("a", TEXT), ("b", TEXT + " again")])
        calls = {"near_key": lambda: ix.near_key("a"), "near_many": lambda: ix.near_many([TEXT, "another text, about cats"])}
        for label, call in calls.items():
            call()  # warm
            cross: set = set()
            _, functions = _trace(call, cross)
            entries = Counter(callee for _, callee, _ in cross if not callee.startswith(("simdb.errors", "simdb.results")))
            assert max(entries.values()) <= MAX_ENTRIES, (label, entries)
            assert not [c for c in cross if layer(c[1]) > layer(c[0])], label
            assert functions["simdb.core.validate.check_k"] == 1, (label, functions)


def test_a_verified_add_reads_its_text_once(database_url, collection_name):
    """add and add_if_unique on a default collection: the fingerprint looks its words up once, and the sketch
    and the band keys come from one pass over the character grams."""
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("warm", "warm up")
        _, add = _trace(lambda: ix.add("a", TEXT))
        _, unique = _trace(lambda: ix.add_if_unique("b", TEXT + " again"))
        assert ix.get("a").fp == ix.fingerprinter.fingerprint(TEXT)
        assert [m.key for m in ix.near(TEXT)] == ["a"]
    for functions in (add, unique):
        assert functions["simdb.core.fingerprint.hashing.token_ids"] == 1
        assert functions["simdb.core.sketch.chars.char_stream"] == 1


def test_a_verified_add_if_unique_dumps_meta_once(database_url):
    """The verified rule's add_if_unique: meta dumped once at the API, the store takes the JSON."""
    name = "meta-" + uuid.uuid4().hex[:8]
    with SimhashIndex(database_url, name) as ix:
        assert ix.rule.name == "banded"
        ix.add("a", TEXT)
        results = []
        _, functions = _trace(lambda: results.append(ix.add_if_unique("b", "another text, about cats", meta={"n": 2})))
        assert results[0].inserted and ix.get("b").meta == {"n": 2}
        assert functions["simdb.core.validate.dump_meta"] == 1, functions
        assert functions["simdb.core.validate.check_key"] == 1, functions


def test_k_the_key_and_meta_are_checked_once_per_call(database_url, collection_name):
    """k once (at the API), the key once (the one text checker), meta dumped once: the store takes checked values."""
    with SimhashIndex(database_url, collection_name) as ix:
        ix.add("a", TEXT)
        list(ix.pairs())  # warm: lazy set-up is not the walk
        calls = {
            "add_if_unique(fp)": lambda: ix.add_if_unique("c", fp=5, k=3, meta={"n": 1}),
            "add_if_unique(text)": lambda: ix.add_if_unique("d", TEXT + " and more", meta={"n": 2}),
            "pairs()": lambda: list(ix.pairs()),
            "pairs(verify=False)": lambda: list(ix.pairs(3, verify=False)),
            "clusters()": lambda: list(ix.clusters()),
        }
        for label, call in calls.items():
            _, functions = _trace(call)
            assert functions["simdb.core.validate.check_k"] == 1, (label, functions)
            assert functions["simdb.core.validate.check_key"] == (1 if "add" in label else 0), (label, functions)
            assert functions["simdb.core.validate.dump_meta"] == (1 if "add" in label else 0), (label, functions)
