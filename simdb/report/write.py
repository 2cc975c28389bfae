"""``write_report``: a report of a collection's clusters, written atomically to a file.

It gets the clusters from a ``SimhashIndex`` (``index.clusters(...)``, as
``simdb dups`` does), looks up each key's text (see :mod:`simdb.report` for
where texts come from) and writes the page from :mod:`simdb.report.render`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from simdb.core.bits import hamming
from simdb.core.kept_texts import decompress_text, file_roots, keeps_texts
from simdb.errors import InvalidArgumentError, KeyNotFoundError
from simdb.report.data import ReportCluster, ReportItem, ReportResult, attribute, build_report_data
from simdb.report.render import render_html
from simdb.store.rows import rows_for_keys
from simdb.util.atomic_file import atomic_file
from simdb.util.confined_files import check_directory, read_confined, read_recorded

__all__ = ["TextSource", "write_report"]


TextSource = Mapping[str, str] | Callable[[str], "str | None"]


#: why a row of a collection that does not keep texts, and names no file, has none in the report
NOT_KEPT = ("the collection does not keep texts (simdb add --store-text, SimhashIndex(..., store_texts=True)) "
            "and the row names no file added with 'simdb add'")


def _lookup_text(
    key: str,
    row: Mapping[str, Any] | None,
    texts: TextSource | None,
    texts_from: Path | None,
    limit: int,
    sources: tuple[list[str], bool],
) -> tuple[str | None, str | None]:
    """(The text of ``key``, None) or (None, why there is none), first hit wins (see :mod:`simdb.report`):
    ``texts``, the kept text, ``meta.text``, ``texts_from``, the file ``simdb add`` read it from (only
    inside the folders recorded then: ``sources`` = (recorded roots, whether the collection keeps texts))."""
    if texts is not None:
        t = texts.get(key) if isinstance(texts, Mapping) else texts(key)
        if t is not None:
            return str(t), None
    if row is None:
        return None, "no row with this key in the collection"
    kept = decompress_text(row.get("text_z"))
    if kept is not None:
        return kept, None
    meta = row.get("meta")
    if isinstance(meta, Mapping) and isinstance(meta.get("text"), str):
        return meta["text"], None
    if texts_from is not None:
        t = read_confined(texts_from, key, limit)
        if t is not None:
            return t, None
    roots, keeps = sources
    path = meta.get("path") if isinstance(meta, Mapping) else None
    if isinstance(path, str):
        t, why = read_recorded(roots, path, limit)
        return t, (why or None)
    if keeps:
        return None, "no text was kept for this row (added by fingerprint, or before the collection kept texts)"
    return None, NOT_KEPT


def _jaccard(a: Any, b: Any) -> float | None:
    if not a or not b:
        return None
    sa, sb = set(a), set(b)
    union = len(sa | sb)
    return len(sa & sb) / union if union else None


def _rows_for_keys(index: Any, keys: list[str]) -> dict[str, dict[str, Any]]:
    """key -> {"fp": unsigned int | None, "meta": ..., "shingles": list | None},
    fetched in batches from the store (:func:`simdb.store.rows.rows_for_keys`) when the
    index exposes ``connection()`` and ``collection_id`` (``SimhashIndex`` does), else
    through ``index.get(key)`` one key at a time."""
    connection = getattr(index, "connection", None)
    collection_id = getattr(index, "collection_id", None)
    out: dict[str, dict[str, Any]] = {}
    if connection is None or collection_id is None:
        for key in keys:
            m = index.get(key)
            if m is not None:
                fp = attribute(m, "fp")
                out[key] = {"fp": None if fp is None else int(fp), "meta": attribute(m, "meta"),
                            "shingles": attribute(m, "shingles")}
        return out
    return rows_for_keys(connection(), int(collection_id), keys)


def _selected_clusters(index: Any, cl_kwargs: dict[str, Any], wanted: set[str] | None) -> list[tuple[str, list]]:
    """(representative key, [(member key, member as given), ...] without the representative) of the
    index's clusters; with ``wanted``, only those containing one of them."""
    raw: list[tuple[str, list]] = []
    for c in index.clusters(**cl_kwargs):
        rep = attribute(c, "representative")
        rep_key = str(rep if isinstance(rep, str) else attribute(rep, "key"))
        members = attribute(c, "members")
        if members is None:  # simdb.results.Cluster: representative + keys (representative first)
            members = attribute(c, "keys")
        given = [(m if isinstance(m, str) else str(attribute(m, "key")), m) for m in members or ()]
        if wanted is not None and rep_key not in wanted and not wanted.intersection(k for k, _ in given):
            continue
        raw.append((rep_key, [(k, m) for k, m in given if k != rep_key]))
    return raw


def _refuse_unknown(name: Any, wanted: set[str] | None, rows: Mapping[str, Any]) -> None:
    """``keys=`` naming a key the collection does not hold is a mistake (a typo, another collection),
    not "no cluster": an empty report would say the key has no near-duplicates."""
    missing = sorted((wanted or set()) - rows.keys())
    if missing:
        where = f" of collection '{name}'" if name is not None else ""
        shown = ", ".join(repr(k) for k in missing[:5]) + (f" and {len(missing) - 5:,} more" if len(missing) > 5 else "")
        raise KeyNotFoundError(f"keys: {len(missing):,} key{'' if len(missing) == 1 else 's'} not in the rows{where}: {shown}")


def _total(index: Any) -> int | None:
    """Rows in the collection, or None for an index object without ``len``."""
    try:
        return len(index)
    except TypeError:
        return None


def _rule_text(verifier: Any, k: int, min_jaccard: float | None) -> str:
    """The rule the clusters were found by, for the header: a verified collection's Jaccard threshold
    and shingle scheme, else the Jaccard threshold or Hamming distance asked for (not a bare "k = 3",
    which a verified collection does not answer by)."""
    if verifier is not None:
        return f"Jaccard \u2265 {verifier.min_jaccard if min_jaccard is None else min_jaccard:g} ({verifier.scheme})"
    return f"Jaccard \u2265 {min_jaccard:g}" if min_jaccard is not None else f"Hamming distance \u2264 {k}"


def write_report(
    index: Any,
    path: str | os.PathLike[str],
    *,
    k: int = 3,
    min_jaccard: float | None = None,
    keys: Iterable[str] | None = None,
    texts: TextSource | None = None,
    texts_from: str | os.PathLike[str] | None = None,
    read_files: bool | None = None,
    include_singletons: bool = False,
    max_text_chars: int = 20_000,
    max_member_texts: int = 1_000,
    title: str | None = None,
) -> ReportResult:
    """Write an HTML review report of ``index``'s near-duplicate clusters to ``path``.

    ``k`` and ``min_jaccard`` select clusters exactly as ``simdb dups`` does
    (``index.clusters(k=k, min_jaccard=...)``). With ``keys`` (e.g. the keys
    just added), only the clusters containing at least one of them are shown;
    a key the collection does not hold raises ``KeyNotFoundError`` naming it.
    ``texts`` / ``texts_from`` say where texts come from (see the module doc):
    files are read only from inside the directory ``texts_from``, never from a
    path a key names by itself. ``read_files`` is accepted for compatibility:
    ``False`` changes nothing, ``True`` is an error asking for ``texts_from``.
    Returns a ``ReportResult``; the file is written atomically.
    """
    if read_files:
        raise InvalidArgumentError(
            "read_files=True is no longer supported (it read any file a key named, e.g. /etc/passwd): "
            "pass texts_from=DIR to show the files under DIR"
        )
    root = None if texts_from is None else check_directory(texts_from)
    cl_kwargs: dict[str, Any] = {"k": k}
    if min_jaccard is not None:
        cl_kwargs["min_jaccard"] = min_jaccard
    if include_singletons:
        cl_kwargs["include_singletons"] = True
    wanted = None if keys is None else set(map(str, keys))
    raw = _selected_clusters(index, cl_kwargs, wanted)

    all_keys = {rep for rep, _ in raw} | {key for _, ms in raw for key, _ in ms} | (wanted or set())
    rows = _rows_for_keys(index, sorted(all_keys)) if all_keys else {}
    name = getattr(index, "collection", None)
    name = getattr(name, "name", name)
    _refuse_unknown(name, wanted, rows)
    config = getattr(index, "config", None)
    sources = (file_roots(config), keeps_texts(config))
    verifier = getattr(index, "verifier", None)

    def item(key: str, given: Any, rep_row: dict[str, Any] | None) -> ReportItem:
        row = rows.get(key, {})
        fp = row.get("fp")
        dist = None
        jac = None
        if rep_row is not None:
            if fp is not None and rep_row.get("fp") is not None:
                dist = hamming(fp, rep_row["fp"])
            elif not isinstance(given, str):
                dist = attribute(given, "distance")
            # a verified collection stores bottom-k sketches: its own Jaccard (simdb.core.sketch), not a set's
            jac = (verifier.similarity if verifier is not None else _jaccard)(row.get("shingles"), rep_row.get("shingles"))
            if jac is None and not isinstance(given, str):
                jac = attribute(given, "jaccard")
        text, why = _lookup_text(key, rows.get(key), texts, root, max_text_chars, sources)
        return ReportItem(key=key, text=text, distance=dist, jaccard=jac, fp=fp, why=why)

    clusters = [ReportCluster(representative=item(rep_key, rep_key, None),
                              members=[item(key, m, rows.get(rep_key, {})) for key, m in members])
                for rep_key, members in raw]

    total = _total(index)
    data = build_report_data(
        clusters,
        title=title or (f"simdb near-duplicate report: {name}" if name else "simdb near-duplicate report"),
        collection=None if name is None else str(name),
        k=k,
        min_jaccard=min_jaccard,
        rule=_rule_text(verifier, k, min_jaccard),
        total_texts=total,
        max_text_chars=max_text_chars,
        max_member_texts=max_member_texts,
        fold=verifier is not None,
        keys_filter=None if wanted is None else (
            f"clusters containing any of {len(wanted):,} given key{'' if len(wanted) == 1 else 's'}"
        ),
    )
    page = render_html(data)
    target = os.fspath(path)
    with atomic_file(target, "w", encoding="utf-8") as f:  # whole or not at all: never half a page
        f.write(page)
    return ReportResult(
        path=target,
        clusters=len(clusters),
        texts_in_clusters=sum(c.size for c in clusters),
        total_texts=total,
        bytes=len(page.encode("utf-8")),
        texts_shown=sum(i.text is not None for c in clusters for i in (c.representative, *c.members)),
    )
