"""The built documentation site: no broken internal link, no raw Sphinx role.

Why over the built HTML and not the Markdown: ``mkdocs build --strict`` checks the links that
Markdown pages write, but not what mkdocstrings renders from docstrings, nor links that leave
``docs/`` (``../examples/app.py`` is a 404 on the site, as only ``docs/`` is published); and
the Sphinx roles of the docstrings are only visible once rendered (tools/mkdocs_hooks.py turns
them into code links). The site is built once for the module, into a temporary folder, as
scripts/test.sh builds it; under scripts/test.sh, the build it has just made (``$SIMDB_DOCS_SITE``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO = Path(__file__).resolve().parents[1]
ROLE_RE = re.compile(r":(?:meth|func|class|mod|data|attr|exc):")


class _Page(HTMLParser):
    """The links (href, src) and the ids of one page, and its text outside <script>/<style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self.html = ""
        self._skip = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if "id" in a:
            self.ids.add(a["id"])
        if tag in ("script", "style"):
            self._skip += 1
        for name in ("href", "src"):
            if a.get(name):
                self.links.append(a[name])

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1

    def handle_data(self, data):
        if not self._skip:
            self.text.append(data)


def built_site() -> Path | None:
    """The site scripts/test.sh has just built with ``mkdocs build --strict`` (``$SIMDB_DOCS_SITE``),
    if any: the same build of the same tree, so this module checks it instead of building it again
    (a build imports simdb and renders every docstring: tens of seconds on a small machine)."""
    built = os.environ.get("SIMDB_DOCS_SITE")
    if built and (Path(built) / "index.html").is_file():
        return Path(built).resolve()
    return None


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict[Path, _Page]:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    out = built_site()
    if out is None:
        out = tmp_path_factory.mktemp("site").resolve()
        env = dict(os.environ, NO_MKDOCS_2_WARNING="1", PYTHONPATH=str(REPO))
        p = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
                           cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stderr[-3000:]
    pages = {}
    for path in out.rglob("*.html"):
        page = _Page()
        page.html = path.read_text(encoding="utf-8")
        page.feed(page.html)
        pages[path] = page
    pages[out] = None  # the root, for resolving
    return pages


def _root(site) -> Path:
    return next(p for p, v in site.items() if v is None)


def broken_links(site) -> list[str]:
    root = _root(site)
    broken = []
    for path, page in site.items():
        if page is None:
            continue
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "data:")):
                continue  # external: not this test's business
            if not parts.path:
                target = path
            elif parts.path.startswith("/"):  # 404.html links from the site's root
                target = root / unquote(parts.path).lstrip("/")
            else:
                target = (path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{path.relative_to(root)}: {link}"
            if not target.exists():
                broken.append(where)
            elif parts.fragment and target.suffix == ".html":
                ids = site[target].ids if target in site else set()
                if unquote(parts.fragment) not in ids:
                    broken.append(where + " (no such anchor)")
    return broken


def test_no_broken_internal_link(site):
    assert broken_links(site) == []


def test_no_raw_sphinx_role(site):
    root = _root(site)
    raw = [f"{p.relative_to(root)}: {m}" for p, page in site.items() if page is not None
           for m in ROLE_RE.findall("".join(page.text))]
    assert raw == []


def test_the_link_check_sees_a_broken_link(tmp_path):
    tmp_path = tmp_path.resolve()
    """The checker itself: a missing page and a missing anchor are reported, a good link is not."""
    (tmp_path / "a").mkdir()
    good, bad = _Page(), _Page()
    good.feed('<h2 id="here">x</h2><a href="../a/">a</a><a href="#here">h</a><a href="https://example.org/x">e</a>')
    bad.feed('<a href="../examples/app.py">code</a><a href="a/#nowhere">gone</a>')
    (tmp_path / "a" / "index.html").write_text("", encoding="utf-8")
    site = {tmp_path: None, tmp_path / "a" / "index.html": good, tmp_path / "b.html": bad}
    assert broken_links(site) == ["b.html: ../examples/app.py", "b.html: a/#nowhere (no such anchor)"]


#: reST and Python notation that Markdown misreads in a docstring: ``2**24 ... 2**53`` (bold between
#: the powers), a paragraph or a line ending in ``::`` (a reST literal block's marker, printed as
#: is), a docstring line starting with ``>= 0.8`` (a blockquote; no docstring means one)
MISRENDERED = {
    "<strong> between digits (a power written 2**24: write 2^24)": re.compile(r"\d</?strong>\d"),
    "'::' ending a paragraph (a reST literal block: end the line with ':' and indent the code)":
        re.compile(r"::</p>"),
    "a blockquote (a docstring line starting with '>' or '>=': reflow the line)": re.compile(r"<blockquote>"),
}


def misrendered(site) -> list[str]:
    root = _root(site)
    return [f"{p.relative_to(root)}: {why}: ...{page.html[max(0, m.start() - 60):m.end() + 30]!r}"
            for p, page in site.items() if page is not None and p.relative_to(root).parts[0] == "reference"
            for why, pattern in MISRENDERED.items() for m in pattern.finditer(page.html)]


def test_no_misrendered_docstring(site):
    assert misrendered(site) == []


def test_the_misrendering_check_sees_each_kind(tmp_path):
    page = _Page()
    page.html = ("<p>below 2<strong>24 or 2</strong>53</p><p>::</p><p>as follows::</p>"
                 "<p>Jaccard of 4-grams</p><blockquote><p>= 0.8</p></blockquote><p><strong>bold</strong> 2^24</p>")
    (tmp_path / "reference").mkdir()
    found = misrendered({tmp_path: None, tmp_path / "reference" / "index.html": page})
    assert [f.split(": ")[1].split(" ")[0] for f in found] == ["<strong>", "<strong>", "'::'", "'::'", "a"]


#: the page on writing the docs, which shows the rule by example (every other page: what was measured or decided, and when)
DEVELOPER_PAGES = {"writing-docs"}
ISSUE_RE = re.compile(r"\bissues? \d+|#\d+\b")


def test_no_internal_issue_number_on_user_pages(site):
    root = _root(site)
    found = []
    for p, page in site.items():
        rel = p.relative_to(root) if page is not None else None
        if rel is None or rel.parts[0] in DEVELOPER_PAGES or rel.parts[0] == "search":
            continue
        found += [f"{rel}: {m}" for m in ISSUE_RE.findall("".join(page.text))]
    assert found == []


def test_the_hook_renders_roles_and_drops_issue_numbers():
    sys.path.insert(0, str(REPO / "tools"))
    try:
        import mkdocs_hooks as hooks
    finally:
        sys.path.remove(str(REPO / "tools"))
    assert hooks.render_roles(":meth:<code>~simdb.SimhashIndex.near</code> and :mod:<code>a b</code>") == (
        '<autoref identifier="simdb.SimhashIndex.near" optional><code>near</code></autoref> and <code>a b</code>'
    )
    assert hooks.drop_issue_numbers("Answers (issue 8): a legacy (issue 8) x, (issue 13, y), issue 13's z") == (
        "Answers: a legacy x, (y), z"
    )


def test_the_site_scripts_test_sh_built_is_used(tmp_path, monkeypatch):
    (tmp_path / "index.html").write_text("<html></html>", encoding="utf-8")
    monkeypatch.setenv("SIMDB_DOCS_SITE", str(tmp_path))
    assert built_site() == tmp_path.resolve()
    monkeypatch.setenv("SIMDB_DOCS_SITE", str(tmp_path / "missing"))  # no build there: the module builds its own
    assert built_site() is None
    monkeypatch.delenv("SIMDB_DOCS_SITE")
    assert built_site() is None
