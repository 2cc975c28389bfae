"""The commands that search a collection: ``query``, ``dups`` and ``check``.

They only read: a missing collection is an error (``Session.require_collection``),
never created, and the schema is never migrated (see ``MIGRATING_COMMANDS``).
"""

from __future__ import annotations

from typing import Any

from simdb.cli.inputs import file_records, read_query_text, walk
from simdb.cli.output import counted, err, out, print_csv, print_json, print_json_stream, shown, table
from simdb.cli.results import (
    cluster_dict,
    criterion,
    k_of,
    match_dict,
    measures,
    most_similar_first,
    pair_dict,
    rule_dict,
    scans,
)
from simdb.cli.session import Session
from simdb.cli.status import EXIT_FOUND, EXIT_OK, PROG, CliError
from simdb.core.sketch import SCHEME, explain
from simdb.dataset.records import is_same_file

__all__ = ["cmd_query", "cmd_dups", "cmd_check"]


def _matches_of_key(args, index) -> list:
    """The near-duplicates of the stored text ``--key`` (itself excluded), by the collection's rule:
    :meth:`SimhashIndex.near_key` verifies the stored sketch against the stored rows, so the answer is
    that of ``query --file`` with the key's text (``--hamming``: by Hamming distance <= k)."""
    try:
        return index.near_key(args.key, k=args.k, limit=args.limit, min_jaccard=args.min_jaccard,
                              verify=_verify_of(args))
    except KeyError:
        raise CliError(f"no text with key {args.key!r} in collection '{args.collection}'") from None


def _verify_of(args) -> bool | None:
    """``verify=`` for the library: False under ``--hamming`` (the Hamming answer, asked for by name),
    else None (the collection's rule)."""
    return False if args.hamming else None


def _note_scan(args, index) -> None:
    """Say on stderr that a query compares every row (a threshold below the band keys' reach:
    exact, and as slow as a sequential scan), as the "no near-duplicates (...)" line says on stdout."""
    if scans(args, index) and not args.quiet:
        err(f"{PROG}: note: {criterion(args, index)}: below the band keys' reach, the text is compared with "
            "every stored row (exact, as slow as a sequential scan)")


def cmd_query(args, session: Session) -> int:
    session.require_collection()
    index = session.index
    text = read_query_text(args)
    if text is None:  # --key
        matches = _matches_of_key(args, index)
        text = index.text(args.key) if args.explain else None  # the key's kept text, if the collection keeps it
    else:
        k = args.k if args.min_jaccard is not None else k_of(args)
        matches = index.near(text, k=k, limit=args.limit, verify=_verify_of(args), min_jaccard=args.min_jaccard)
    if args.json:
        _note_scan(args, index)
        answer = [match_dict(m) for m in matches]
        if args.explain:
            for d, m in zip(answer, matches):
                d["explain"] = _explanation(text, m, index)
        print_json(answer)
        return EXIT_OK
    if not matches:
        if not args.quiet:
            out(f"no near-duplicates ({criterion(args, index)}) in collection '{args.collection}'")
        return EXIT_OK
    _note_scan(args, index)
    if args.explain:
        _explain(text, matches, index)
        return EXIT_OK
    rows = [[_jaccard_cell(m.jaccard), m.distance, m.key] for m in matches]
    out(table(["jaccard", "distance", "key"], rows, right=(0, 1)))
    return EXIT_OK


def _explanation(query: str | None, match, index) -> dict | None:
    """Why ``match`` is one: the words both texts share (a count), those only in the query and only
    in the match (each in first-seen order), and the exact Jaccard of their full shingle sets
    (:func:`simdb.core.sketch.explain` under the collection's scheme). The stored text is the one the
    collection keeps (:meth:`SimhashIndex.text`, or an older row's meta.text); None where a text is
    missing (a collection that keeps no texts, or a ``--key`` with none)."""
    stored = index.text(match.key)
    if query is None or not isinstance(stored, str):
        return None
    scheme = index.verifier.scheme if index.verifier is not None else SCHEME
    e = explain(query, stored, scheme)
    return {"shared_words": len(e["shared"]), "exact_jaccard": round(float(e["jaccard"] or 0.0), 4),
            "only_in_query": e["only_a"], "only_in_match": e["only_b"]}


def _explain(query: str | None, matches, index) -> None:
    """Per match: its two measures, then :func:`_explanation` (the first 40 words of each side)."""
    for m in matches:
        out(f"{shown(m.key)}: {measures(m.jaccard, m.distance)}")
        e = _explanation(query, m, index)
        if e is None:
            out("  (no stored text to compare: add texts with --store-text)")
            continue
        out(f"  shared words: {e['shared_words']}; exact shingle Jaccard {e['exact_jaccard']:.3f}")
        out(f"  only in the query:  {' '.join(e['only_in_query'][:40]) or '-'}")
        out(f"  only in {shown(m.key)}: {' '.join(e['only_in_match'][:40]) or '-'}")


#: the columns of ``dups --pairs``, in one order for the table, the CSV and the JSON objects: the keys,
#: then the two measures, as the CSV and JSON always had them (and as SQL's simdb_pairs and the API's
#: pairs name a pair: key_a, key_b first)
PAIR_COLUMNS = ["key_a", "key_b", "jaccard", "distance"]


def _print_pairs(args, index, fmt: str) -> None:
    """The pairs, most similar first (Jaccard, then distance), with both measures under their names:
    the rule's similarity (``jaccard``: empty for a Hamming answer) and the Hamming ``distance``.
    Sorting holds the pairs in memory (a few hundred bytes each)."""
    pairs = sorted((pair_dict(p) for p in index.pairs(k=k_of(args), verify=_verify_of(args), min_jaccard=args.min_jaccard)),
                   key=most_similar_first)
    if fmt == "json":
        print_json_stream(iter(pairs))
    elif fmt == "csv":
        print_csv(PAIR_COLUMNS, (["" if p.get(c) is None else p[c] for c in PAIR_COLUMNS] for p in pairs))
    elif pairs:
        out(table(PAIR_COLUMNS,
                  [[p["key_a"], p["key_b"], _jaccard_cell(p.get("jaccard")), p.get("distance", "-")] for p in pairs],
                  right=(2, 3)))
    elif not args.quiet:
        out(f"no near-duplicate pairs ({criterion(args, index)}) in collection '{args.collection}'")


def _jaccard_cell(j) -> str:
    return "-" if j is None else f"{float(j):.3f}"


def _print_cluster_table(args, clusters, index) -> None:
    n = 0
    texts = 0
    for c in clusters:
        n += 1
        texts += c["size"]
        out(f"cluster {c['cluster']}: {counted(c['size'], 'text')}")
        for key in c["keys"]:
            out(("  * " if key == c["representative"] else "    ") + shown(key))
    if not args.quiet:
        if n:
            out(f"{counted(n, 'cluster')}, {counted(texts, 'text')} ({criterion(args, index)}; * = representative, the earliest added)")
        else:
            out(f"no near-duplicates ({criterion(args, index)}) in collection '{args.collection}'")


def _print_clusters(args, index, fmt: str) -> None:
    found = index.clusters(k=k_of(args), verify=_verify_of(args), min_jaccard=args.min_jaccard)
    clusters = (cluster_dict(n, c) for n, c in enumerate(found, 1))
    if fmt == "json":
        print_json_stream(clusters)
    elif fmt == "csv":
        print_csv(["cluster", "representative", "key"],
                  ([c["cluster"], c["representative"], key] for c in clusters for key in c["keys"]))
    else:
        _print_cluster_table(args, clusters, index)


def cmd_dups(args, session: Session) -> int:
    fmt = args.output_format or ("json" if args.json else "table")
    session.require_collection()
    (_print_pairs if args.pairs else _print_clusters)(args, session.index, fmt)
    return EXIT_OK


def _print_check(args, results: list[dict]) -> None:
    for r in results:
        if r["matches"]:
            best = r["matches"][0]
            more = f" and {len(r['matches']) - 1} more" if len(r["matches"]) > 1 else ""
            how = measures(best.get("jaccard"), best["distance"])
            out(f"{shown(r['path'])}: near-duplicate of {shown(best['key'])} ({how}){more}")
        elif not args.quiet:
            out(f"{shown(r['path'])}: ok")


def _check_inputs(files, args) -> tuple[list[tuple[str, Any, str | None]], list[str]]:
    """What ``check`` compares: (label, text file or None, record key or None) and the texts, the text
    files first. A text file is one text (its own stored row is left out by :func:`is_same_file`); a .jsonl /
    .csv file is its records, as ``simdb add`` reads them, each labelled and left out by the key add gives it."""
    plain: list[tuple[tuple[str, Any, str | None], str]] = []
    records: list[tuple[tuple[str, Any, str | None], str]] = []
    for path, folder in files:
        for rec in file_records(path, folder, args, None):
            if rec.path is not None:  # a text file
                plain.append(((str(path), path, None), rec.text))
            else:
                records.append(((rec.key, None, rec.key), rec.text))
    both = plain + records
    return [item for item, _ in both], [text for _, text in both]


def cmd_check(args, session: Session) -> int:
    files = walk(args.paths, args.glob)
    if not files:
        raise CliError(f"no files matched (paths: {' '.join(args.paths)}, --glob {args.glob!r})")
    inputs, texts = _check_inputs(files, args)
    session.require_collection()
    index = session.index
    _note_scan(args, index)
    if args.min_jaccard is not None:
        answers = [index.near(t, k=args.k, min_jaccard=args.min_jaccard) for t in texts]
    else:
        answers = index.near_many(texts, k=k_of(args), verify=_verify_of(args))
    results = []
    found = False
    for (label, path, own_key), matches in zip(inputs, answers):
        if path is not None:
            matches = [m for m in matches if not is_same_file(m.key, getattr(m, "meta", None), path, args.root)]
        else:
            matches = [m for m in matches if m.key != own_key]
        found = found or bool(matches)
        results.append({"path": label, "duplicate": bool(matches), "matches": [match_dict(m) for m in matches]})
    if args.json:
        print_json({"rule": rule_dict(args, index), "collection": args.collection, "duplicates_found": found,
                    "files": results})
    else:
        _print_check(args, results)
    return EXIT_FOUND if found else EXIT_OK
