"""The route of two operations through the modules, traced at run time (issue 42).

``../shared/tools/walk.py`` walks the facade's operations (near, add, add_if_unique, ...); this file
walks the two that reach simdb from outside the facade: a **default Django check** (the
:class:`~simdb.django.validators.NotNearDuplicate` validator of a ``VerifiedSimhashModel``, as
docs/django.md sets it up; and a ``SimhashModel``'s, Hamming only) and **``simdb dedup``** of a small JSONL file, run in this process. Each
runs once untraced (caches, connections and imports warm), then once under ``sys.setprofile``.

What is counted, as walk.py counts it (``simdb.errors`` and ``simdb.results``, which every layer
shares, left out): the simdb modules the call runs code in; the distinct calls from one module into a
function of another (a call repeated in a loop counts once); the most distinct calls entering one
module (re-entry); and the calls from a lower layer into a higher one, by the ``layers`` contract of
pyproject.toml (the one import-linter checks). Why: a short route, each module entered once or twice
and always downwards, is what a newcomer can follow; a count of modules alone would not see a route
that doubles back. The issue's targets: <= 16 modules, <= 30 cross-module calls, re-entry <= 3,
0 calls up a layer.
"""

from __future__ import annotations

import json
import sys
import threading
import tomllib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from cli_support import run_in_process

ROOT = Path(__file__).resolve().parents[1]
#: modules every layer shares: neither counted as modules nor as calls (as walk.py)
QUIET = ("simdb.errors", "simdb.results")
#: the issue's targets for every walked operation
MAX_MODULES, MAX_CALLS, MAX_REENTRY = 16, 30, 3


def _layers() -> dict[str, int]:
    """Module prefix -> rank (0 the lowest), from the import-linter ``layers`` contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "layers"]
    top = len(contract["layers"]) - 1
    return {name.strip(): top - i for i, layer in enumerate(contract["layers"]) for name in layer.split(":")}


LAYERS = _layers()


def layer(module: str) -> int:
    """The rank of a module's layer; the package root (``simdb/__init__``) ranks with the core."""
    for prefix, rank in LAYERS.items():
        if module == prefix or module.startswith(prefix + "."):
            return rank
    return LAYERS["simdb.core"]


def trace(fn: Callable[[], object], threads: bool = False) -> list[tuple[str | None, str, str]]:
    """Run ``fn`` under a profiler: (calling simdb module, called simdb module, called function) of
    each call of a simdb function. The caller is the nearest simdb frame up the stack, so a call
    through Django's ORM (a lookup's ``as_sql``) is the simdb module's that asked Django. The calling
    thread only, as walk.py traces; ``threads``: also the threads ``fn`` starts (``simdb dedup``
    computes a batch's features in a read-ahead thread)."""
    events: list[tuple[str | None, str, str]] = []

    def simdb_caller(frame):
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if name == "simdb" or name.startswith("simdb."):
                return name
            frame = frame.f_back
        return None

    def profile(frame, event, arg):
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module == "simdb" or module.startswith("simdb."):
                events.append((simdb_caller(frame.f_back), module, frame.f_code.co_qualname))

    sys.setprofile(profile)
    if threads:
        threading.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    return events


def walk(fn: Callable[[], object], name: str, threads: bool = False) -> dict[str, int]:
    """The figures of one traced call of ``fn`` (printed, with its cross-module calls)."""
    events = trace(fn, threads)
    modules = [m for m in dict.fromkeys(m for _, m, _ in events) if not m.startswith(QUIET)]
    cross = list(dict.fromkeys((c, m, q) for c, m, q in events if c is not None and c != m and not m.startswith(QUIET)))
    entries = Counter(m for _, m, _ in cross)
    up = [(c, m, q) for c, m, q in cross if layer(m) > layer(c)]
    figures = {"modules": len(modules), "calls": len(cross), "links": len({(c, m) for c, m, _ in cross}),
               "re-entry": max(entries.values(), default=0), "up": len(up)}
    print(f"\nwalk {name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))
    print("  modules:", " > ".join(m.removeprefix("simdb.") for m in modules))
    for c, m, q in cross:
        mark = "   (UP)" if layer(m) > layer(c) else ""
        print(f"  {c.removeprefix('simdb.')} -> {m.removeprefix('simdb.')}.{q}{mark}")
    return figures


COMMENTS = [f"Comment {i}: the parcel for order {i * 37} arrived on day {i % 28}, two days late, and the box "
            f"was dented at corner {i % 4}, but item {i * 7} inside was fine." for i in range(20)]


@pytest.fixture(scope="module")
def comment_model(django_site):
    """A ``VerifiedSimhashModel`` with the defaults (docs/django.md's ``Comment``) holding COMMENTS."""
    from django.db import connection
    from django.db import models as dj

    from simdb.django.verified import VerifiedSimhashModel

    class WalkComment(VerifiedSimhashModel):
        simhash_source = "body"
        body = dj.TextField()

        class Meta:
            app_label = "simdb_walk_tests"

    with connection.schema_editor() as editor:
        editor.create_model(WalkComment)
    for text in COMMENTS:
        WalkComment(body=text).save()
    yield WalkComment
    with connection.schema_editor() as editor:
        editor.delete_model(WalkComment)


@pytest.mark.parametrize("refused", [False, True], ids=["passes", "refuses"])
def test_a_default_django_check_takes_a_short_route(comment_model, refused):
    from django.core.exceptions import ValidationError

    from simdb.django.validators import NotNearDuplicate

    check = NotNearDuplicate(comment_model)
    text = COMMENTS[5].replace("dented", "dneted") if refused else "A new comment about something else entirely."

    def run() -> None:
        try:
            check(text)
        except ValidationError:
            assert refused
        else:
            assert not refused

    run()  # warm
    figures = walk(run, f"Django check ({'refuses' if refused else 'passes'})")
    # issue 42: 12-13 modules, 40-46 calls, re-entry 8 before (k checked 3 times, the lookup
    # fingerprinting again, verifiers compared per call); 10-11 modules, 14-18 calls, re-entry 3 after
    assert figures["modules"] <= MAX_MODULES
    assert figures["calls"] <= MAX_CALLS
    assert figures["re-entry"] <= MAX_REENTRY
    assert figures["up"] == 0


def test_a_hamming_model_check_takes_a_short_route(django_site):
    """The same check on a ``SimhashModel`` (the example project's ``posts.Post``: Hamming distance only)."""
    from simdb.django.validators import NotNearDuplicate

    check = NotNearDuplicate("posts.Post")
    text = "A post about nothing in particular that no test stores."
    check(text)  # warm
    figures = walk(lambda: check(text), "Django check (SimhashModel)")
    assert figures["modules"] <= MAX_MODULES
    assert figures["calls"] <= MAX_CALLS
    assert figures["re-entry"] <= MAX_REENTRY
    assert figures["up"] == 0


def test_a_cold_django_check_checks_k_once_and_reads_the_character_grams_once(comment_model):
    """A text never seen (nothing remembered): ``k`` is checked once from the Django side, and the text's
    character grams are streamed once for both its rule-2 sketch and its band keys (issue 42)."""
    from simdb.django.validators import NotNearDuplicate

    check = NotNearDuplicate(comment_model)
    check("A first comment to warm the imports and the connection.")
    events = trace(lambda: check("A cold comment: the courier left the parcel at the wrong door again."))
    k_checks = [c for c, _, q in events if q == "check_k" and c is not None and c.startswith("simdb.django")]
    assert k_checks == ["simdb.django.verified"]
    assert sum(1 for _, m, q in events if m == "simdb.core.sketch.chars" and q == "char_stream") == 1


def test_simdb_dedup_of_a_small_jsonl_file_takes_a_short_route(database_url, tmp_path):
    lines = [{"id": f"r{i}", "text": t} for i, t in enumerate(COMMENTS[:14])]
    lines += [{"id": f"c{i}", "text": COMMENTS[i].replace("dented", "dneted")} for i in range(6)]  # 6 typo'd copies
    (tmp_path / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")

    def run() -> None:
        p = run_in_process(["dedup", "in.jsonl", "-o", "out.jsonl", "-q", "--database-url", database_url], cwd=tmp_path)
        assert p.returncode == 0, p.stderr
        assert len((tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 14

    run()  # warm
    figures = walk(run, "simdb dedup (20 JSONL records)")
    # issue 42: 43 modules, 118 calls, re-entry 12, 4 calls up a layer before (a temporary collection on the
    # server: the index, the store and its bulk load on the route; the CLI's callbacks called from below)
    assert figures["modules"] <= MAX_MODULES
    assert figures["calls"] <= MAX_CALLS
    assert figures["re-entry"] <= MAX_REENTRY
    assert figures["up"] == 0
    # with the read-ahead thread, where the batch's features are computed (the rule's fingerprint, sketch and
    # band keys: the core's fingerprint and sketch modules), which walk.py's method does not see: today's
    # figures, to be lowered
    everything = walk(run, "simdb dedup (20 JSONL records), every thread", threads=True)
    assert everything["modules"] <= 20
    assert everything["calls"] <= 47
    assert everything["up"] == 0


WRITES = [f"Record {i}: the committee met on day {i % 28} to discuss item {i * 7} of the agenda, and agreed "
          f"to publish the minutes after review by member {i % 13}." for i in range(120)]


def test_the_writes_take_a_short_route(database_url, collection_name):
    """add, add_if_unique and add_many (50 items: one chunk) on a default collection, as walk.py walks them:
    each runs its rule's code and the store's, downwards only (issue 42: 17 / 22 / 20 modules, 30 / 48 / 39
    calls, 1 / 1 / 3 calls up a layer before: the store's callbacks into the facade)."""
    from simdb import SimhashIndex

    with SimhashIndex(database_url, collection_name) as ix:
        ix.add_many({"key": str(i), "text": t} for i, t in enumerate(WRITES[:60]))
        query = WRITES[5].replace("agreed", "agred")
        writes = {
            "add(key, text)": lambda: ix.add("one", WRITES[100]),
            "add_if_unique": lambda: ix.add_if_unique("two", query),
            "add_many(50)": lambda: ix.add_many({"key": f"m{i}", "text": t} for i, t in enumerate(WRITES[60:110])),
        }
        for label, call in writes.items():
            call()  # warm
            figures = walk(call, label)
            assert figures["modules"] <= MAX_MODULES, label
            assert figures["calls"] <= MAX_CALLS, label
            assert figures["re-entry"] <= MAX_REENTRY, label
            assert figures["up"] == 0, label
