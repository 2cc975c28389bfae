"""An HTML review report of near-duplicate clusters.

``write_report(index, path, k=3)`` writes **one self-contained HTML file**: CSS
and JavaScript are inline, nothing is fetched from the network, and it works
from a ``file://`` URL. It shows every cluster of near-duplicates (largest
first) with its representative and members, each member's Hamming distance to
the representative (and its Jaccard similarity where the collection stores
shingle sets; elsewhere its Hamming similarity, ``1 - distance/64``, so named), and
the two texts side by side with the changed words marked. A cluster is a connected
component, a chain of near-duplicate pairs: a member may be outside the rule to the
representative and within it to another member, which the page says under its header.

How the pieces fit:

* ``build_report_data(clusters, ...)`` turns plain cluster data into the
  report's JSON-ready dict (word diffs are computed here, in Python, with
  ``difflib`` on word tokens). ``render_html(data)`` turns that into the HTML
  page. ``render_report(clusters, ...)`` does both. None of these needs a
  database, so the rendering is testable on its own.
* ``write_report(index, path, ...)`` gets the clusters from a
  ``SimhashIndex`` (``index.clusters(k=...)``, as ``simdb dups`` does), looks
  up the texts, and writes the file atomically.

Where the texts come from, first hit wins (docs/report.md): the caller's ``texts=``, the text the
collection keeps (else an older row's ``meta["text"]``), ``texts_from=DIR`` (a file *inside* DIR),
the file ``simdb add`` read the row from (only inside the places it recorded). A key is never taken
as a path otherwise: keys are data, and a record ``{"id": "/etc/passwd"}`` must not put that file
into the page (:mod:`simdb.util.confined_files`: ``..``, symlinks out of the folder and non-regular
files are refused). A key with no text is still listed, with the reason.

Safety: every text and key reaches the page as data. The JSON is embedded in a
``<script type="application/json">`` element with ``<``, ``>`` and ``&``
written as ``\\u003c``, ``\\u003e``, ``\\u0026`` (so no text can close the
element), and the page's JavaScript builds the DOM with ``textContent`` and
``createElement`` only — never ``innerHTML`` with data. A text that contains
``<script>`` shows up as those characters and never runs.

Scale: the page renders one page of clusters at a time from the embedded JSON and filters in
memory; texts longer than ``max_text_chars`` (default 20,000) are cut in the file itself and say so.
"""

from simdb.report.data import ReportCluster, ReportItem, ReportResult, build_report_data, json_for_script
from simdb.report.diff import DELETED, EQUAL, INSERTED, RESPACED, tokenize_for_diff, word_diff
from simdb.report.render import render_html, render_report
from simdb.report.write import write_report

__all__ = [
    "ReportItem",
    "ReportCluster",
    "ReportResult",
    "EQUAL",
    "DELETED",
    "INSERTED",
    "RESPACED",
    "tokenize_for_diff",
    "word_diff",
    "json_for_script",
    "build_report_data",
    "render_html",
    "render_report",
    "write_report",
]
