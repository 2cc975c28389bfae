"""Real English and Chinese benchmark texts built from text already on the machine.

Nothing here is written by us: the documents are assembled from

- English: the docstrings of the Python standard library (the ``*.py`` files of
  this interpreter's stdlib, parsed with ``ast``, never imported), followed by
  those of the installed SQLAlchemy, Alembic and Django sources;
- Chinese: the translated messages (``msgstr``) of the GNU gettext catalogues in
  ``/usr/share/locale/zh_CN`` and ``zh_TW`` (coreutils, bash, apt, binutils ... as
  installed) and of Django's ``zh_Hans``/``zh_Hant`` locales (Django is a test
  dependency), read with the ``gettext`` module.

Consecutive pieces are joined (blank line between them) into documents of about
``doc_chars`` characters, in a fixed file order, so every run and every
benchmark sees the same documents. Usage::

    from benchmarks.corpus import english_docs, chinese_docs
    docs = english_docs(max_chars=2_000_000, doc_chars=3000)
"""

from __future__ import annotations

import ast
import gettext
import glob
import importlib.util
import os
import re
import sysconfig
from functools import lru_cache

__all__ = ["chinese_docs", "chinese_pieces", "english_docs", "english_pieces", "english_sentences", "group",
           "sentence_paragraph"]

_HAN = re.compile("[\u4e00-\u9fff]")


#: installed packages whose docstrings extend the English corpus (when installed)
EXTRA_PACKAGES = ("sqlalchemy", "alembic", "django")


def _py_files() -> list[str]:
    roots = [sysconfig.get_paths()["stdlib"]]
    for name in EXTRA_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.origin:
            continue
        roots.append(os.path.dirname(spec.origin))
    files: list[str] = []
    for root in roots:
        for path in sorted(glob.glob(os.path.join(root, "**", "*.py"), recursive=True)):
            rel = os.path.relpath(path, root)
            if rel.startswith(("test", "site-packages", "idlelib" + os.sep + "idle_test")) or "/tests/" in rel:
                continue
            files.append(path)
    return files


@lru_cache(maxsize=1)
def english_pieces(min_chars: int = 200) -> tuple[str, ...]:
    """Docstrings (>= ``min_chars``) of the stdlib (then SQLAlchemy, Alembic, Django), in file order."""
    out: list[str] = []
    for path in _py_files():
        try:
            with open(path, encoding="utf-8") as fh:
                tree = ast.parse(fh.read())
        except (SyntaxError, UnicodeDecodeError, OSError, ValueError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) >= min_chars:
                    out.append(doc)
    return tuple(out)


def _mo_files() -> list[str]:
    files: list[str] = []
    for loc in ("zh_CN", "zh_TW"):
        files += sorted(glob.glob(f"/usr/share/locale/{loc}/LC_MESSAGES/*.mo"))
    spec = importlib.util.find_spec("django")
    if spec is not None and spec.origin:
        root = os.path.dirname(spec.origin)
        for loc in ("zh_Hans", "zh_Hant"):
            files += sorted(glob.glob(os.path.join(root, "**", "locale", loc, "LC_MESSAGES", "*.mo"), recursive=True))
    return files


@lru_cache(maxsize=1)
def chinese_pieces() -> tuple[str, ...]:
    """Translated messages containing Han characters, in catalogue order."""
    out: list[str] = []
    for path in _mo_files():
        try:
            with open(path, "rb") as fh:
                cat = gettext.GNUTranslations(fh)
        except Exception:  # a malformed catalogue is skipped
            continue
        for key, value in cat._catalog.items():  # msgid -> msgstr (plural forms are keyed by tuples)
            if not key or not isinstance(value, str):
                continue
            value = value.strip()
            if _HAN.search(value):
                out.append(value)
    return tuple(out)


def group(pieces, doc_chars: int, max_chars: int | None = None) -> list[str]:
    """Join consecutive pieces into documents of about ``doc_chars`` characters."""
    docs: list[str] = []
    cur: list[str] = []
    size = 0
    total = 0
    for p in pieces:
        cur.append(p)
        size += len(p) + 2
        if size >= doc_chars:
            doc = "\n\n".join(cur)
            docs.append(doc)
            total += len(doc)
            cur, size = [], 0
            if max_chars is not None and total >= max_chars:
                return docs
    if cur:
        docs.append("\n\n".join(cur))
    return docs


def english_docs(max_chars: int | None = 2_000_000, doc_chars: int = 3000) -> list[str]:
    """English documents of ~``doc_chars`` characters from stdlib docstrings."""
    return group(english_pieces(), doc_chars, max_chars)


def chinese_docs(max_chars: int | None = 600_000, doc_chars: int = 1000) -> list[str]:
    """Chinese documents of ~``doc_chars`` characters from gettext translations."""
    return group(chinese_pieces(), doc_chars, max_chars)


if __name__ == "__main__":
    en = english_docs(None)
    zh = chinese_docs(None)
    for name, docs in (("english", en), ("chinese", zh)):
        nbytes = sum(len(d.encode("utf-8")) for d in docs)
        print(f"{name}: {len(docs)} docs, {sum(map(len, docs))} chars, {nbytes / 1e6:.2f} MB UTF-8")
    print(en[0][:300])
    print(zh[0][:300])


@lru_cache(maxsize=1)
def english_sentences() -> tuple[str, ...]:
    """The distinct sentences (6 words or more, whitespace-normalised) of :func:`english_pieces`, in
    corpus order: about 24,000, for paragraphs that share as little text as unrelated real ones."""
    seen: dict[str, None] = {}
    for piece in english_pieces():
        for sentence in re.split(r"(?<=[.!?])\s+", " ".join(piece.split())):
            if len(sentence.split()) >= 6:
                seen.setdefault(sentence.strip(), None)
    return tuple(seen)


def sentence_paragraph(rng, sentences: int = 6) -> str:
    """A paragraph of ``sentences`` corpus sentences drawn at random (~110 words for 6): two such
    paragraphs share a sentence about 0.15 % of the time, as unrelated paragraphs of a real
    collection rarely share text."""
    return " ".join(rng.sample(english_sentences(), sentences))
