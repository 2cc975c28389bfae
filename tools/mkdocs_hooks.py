"""MkDocs hook (mkdocs.yml ``hooks:``): render the Sphinx roles of simdb's docstrings as code links.

Why a renderer-side fix: the docstrings use reStructuredText roles (``:meth:`SimhashIndex.near```,
``:class:`~simdb.errors.InputError```), which read well in ``help()`` and editors but which
mkdocstrings passes through as Markdown, so the API reference showed ``:meth:`` before each name.
Rewriting hundreds of docstrings across modules that others edit in parallel would churn the
whole package; turning the roles into links when the page is built fixes every page at once.

Each ``:role:<code>target</code>`` in a page's HTML becomes an *optional* mkdocs-autorefs
reference: a link to the object's entry where the API reference documents it (a dotted path
such as ``simdb.core.sketch.Verifier.judge``), else the code alone (a name relative to its module,
such as ``pairs``) - never a warning. ``~`` keeps only the last component as the text, as in Sphinx.

The docstrings also cite the project's internal issue numbers ("(issue 8)", "issue 13's"), which
mean nothing to a reader of the site; :func:`drop_issue_numbers` removes them from the rendered
API reference (the Markdown pages are written without them).
"""

from __future__ import annotations

import html
import re
from typing import Any

ROLES = ("meth", "func", "class", "mod", "data", "attr", "exc", "obj", "const", "ref")
#: the role as Markdown renders it: ``:meth:`` then the backticked target as <code>
ROLE_RE = re.compile(r":(?:py:)?(?:" + "|".join(ROLES) + r"):<code>([^<]*)</code>")


def _link(match: re.Match) -> str:
    target = html.unescape(match.group(1)).strip()
    shown = target
    if target.startswith("~"):
        target = target[1:]
        shown = target.rsplit(".", 1)[-1]
    target = target.lstrip(".").removesuffix("()")
    code = f"<code>{html.escape(shown)}</code>"
    if not re.fullmatch(r"[A-Za-z_][\w.]*", target):
        return code
    return f'<autoref identifier="{html.escape(target)}" optional>{code}</autoref>'


_ITEM = r"issues? \d+(?:, item \d+)?"
#: "(issue 8)" -> "", "(issue 13, x" -> "(x", "x, issue 13)" -> "x)", "issue 13's x" -> "x", "(docs, issue 13):" -> "(docs):"
_ISSUE_RES = (
    (re.compile(r"\s*\(" + _ITEM + r"\)"), ""),
    (re.compile(r"\(" + _ITEM + r"[,;:] "), "("),
    (re.compile(r", " + _ITEM + r"\)"), ")"),
    (re.compile(r"\b" + _ITEM + r"'s "), ""),
)


def drop_issue_numbers(page_html: str) -> str:
    """The page's HTML without the internal issue numbers the docstrings cite."""
    for pattern, replacement in _ISSUE_RES:
        page_html = pattern.sub(replacement, page_html)
    return page_html


def render_roles(page_html: str) -> str:
    """The page's HTML with every Sphinx role turned into an optional cross-reference."""
    return ROLE_RE.sub(_link, page_html)


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    """Before mkdocs-autorefs resolves references (its ``on_env``) and search indexes the page."""
    if page.file.src_uri.startswith("reference/"):
        html = drop_issue_numbers(html)
    return render_roles(html)
