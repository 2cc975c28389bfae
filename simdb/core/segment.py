"""Han runs -> words, exactly as jieba 0.42.1 cuts them, natively when ``rjieba`` is installed.

Why a module of its own: Chinese fingerprinting is bound by jieba's pure-Python
segmenter (about 1.3 MB/s of Han text per core). ``rjieba`` (Python binding of the
Rust port jieba-rs, ``pip install simdb[fast]``) ships jieba's dictionary and HMM
and measured the same words as jieba 0.42.1 on every Han run of the Chinese
benchmark corpus, about 20x faster. The other accelerated ports on PyPI
(``jieba_fast``, ``jieba-next``, ``jieba-fast-dat``) cut differently (see
docs/performance.md), so they are not used: a different cut would change the
pinned fingerprints.

One difference is handled here: jieba 0.42.1 only segments ``[\\u4e00-\\u9fd5]``
(its ``re_han_default``) and yields every other non-space character on its own,
while jieba-rs also segments Extension A, the compatibility block and planes 2-3.
Runs holding such characters are split at them, and they are yielded one by one,
as jieba does. ``tests/test_segment.py`` checks the result equals jieba's on
real text, on words and phrases from jieba's dictionary and on random mixtures.

The fallback is jieba itself, in a private ``jieba.Tokenizer`` (a caller's
changes to the global jieba dictionary never change simdb's words), loaded once
per process with its logger silenced. ``SIMDB_SEGMENTER=jieba`` forces it.

jieba keeps its dictionary, parsed, in a cache file it trusts on sight; by default
``jieba.cache`` in the shared temporary directory, where another user's file changed
a Chinese text's words and fingerprint. simdb's tokenizer keeps it in a private
directory instead (:func:`jieba_cache_dir`: ``$XDG_CACHE_HOME/simdb/jieba``, else
``~/.cache/simdb/jieba``, mode 0700), used only while it and ``simdb`` above it belong
to this user and no one else may reach them, and the cache home belongs to this user (or
root) and no one else may write there; without such a directory the dictionary is parsed
in memory, uncached (about a second per process). Each pool worker loads the segmenter
once, when it starts (:func:`simdb.util.parallel.on_worker_start`).
"""

from __future__ import annotations

import logging
import os
import re
import threading

from simdb.errors import InvalidArgumentError
from simdb.util import parallel
from simdb.util.private_dirs import private_cache_dir

__all__ = ["backend", "jieba_cache_dir", "jieba_tokenizer", "quiet_jieba", "segment_runs", "use"]

#: the characters jieba 0.42.1 segments (Han part of its ``re_han_default``); a
#: "\n" (our run separator) is a word of its own in both segmenters
_OUTSIDE_JIEBA_HAN = re.compile("[^\u4e00-\u9fd5\n]")
_JIEBA_HAN_SPLIT = re.compile("([\u4e00-\u9fd5]+)")

_LOCK = threading.Lock()
_JIEBA = None
_NATIVE: object = None  # None: not looked up yet; False: unavailable


class quiet_jieba:
    """Silence jieba's logger (it writes to stderr) while it loads, then restore it."""

    def __enter__(self):
        import jieba

        self.logger = jieba.default_logger
        self.level = self.logger.level
        self.logger.setLevel(logging.CRITICAL + 1)
        return self

    def __exit__(self, *exc):
        self.logger.setLevel(self.level)
        return False


def jieba_cache_dir() -> str | None:
    """The private directory for jieba's dictionary cache (``$XDG_CACHE_HOME/simdb/jieba``, else
    ``~/.cache/simdb/jieba``, created mode 0700), or None when there is no safe one
    (:func:`simdb.util.private_dirs.private_cache_dir`). Why: jieba loads whatever cache file it
    finds (see the module doc)."""
    return private_cache_dir("jieba")


def _initialize(tok) -> None:
    """Load ``tok``'s dictionary, its parsed form cached only in :func:`jieba_cache_dir`."""
    cache_dir = jieba_cache_dir()
    if cache_dir is not None:
        tok.tmp_dir = cache_dir
        tok.initialize()
        return
    with tok.lock:  # what initialize() does when the cache is missing, less writing it anywhere
        tok.FREQ, tok.total = tok.gen_pfdict(tok.get_dict_file())
        tok.initialized = True


def jieba_tokenizer():
    """This process's private, initialised ``jieba.Tokenizer`` (loaded on first use; its dictionary
    cache only in a private directory, :func:`jieba_cache_dir`)."""
    global _JIEBA
    tok = _JIEBA
    if tok is None:
        with _LOCK:
            tok = _JIEBA
            if tok is None:
                import jieba

                with quiet_jieba():
                    tok = jieba.Tokenizer()
                    _initialize(tok)
                _JIEBA = tok
    return tok


def _native():
    """A private ``rjieba.Jieba`` (default dictionary), or None when rjieba is not installed."""
    global _NATIVE
    nat = _NATIVE
    if nat is None:
        with _LOCK:
            nat = _NATIVE
            if nat is None:
                nat = False
                if os.environ.get("SIMDB_SEGMENTER", "").strip().lower() != "jieba":
                    try:
                        import rjieba
                    except ImportError:
                        pass
                    else:
                        nat = rjieba.Jieba()
                _NATIVE = nat
    return nat or None


def use(name: str | None) -> None:
    """Choose this process's segmenter: ``"rjieba"``, ``"jieba"``, or None (rjieba when installed).

    Both give the same words; this exists to measure one against the other.
    Pool workers choose for themselves (``SIMDB_SEGMENTER=jieba`` reaches them).
    """
    global _NATIVE
    if name not in (None, "rjieba", "jieba"):
        raise InvalidArgumentError(f"name must be 'rjieba', 'jieba' or None, got {name!r}")
    with _LOCK:
        if name == "jieba":
            _NATIVE = False
        elif name == "rjieba":
            import rjieba

            _NATIVE = rjieba.Jieba()
        else:
            _NATIVE = None


def backend() -> str:
    """Which segmenter this process uses: ``"rjieba"`` or ``"jieba"``."""
    return "rjieba" if _native() is not None else "jieba"


def _cut_native(nat, text: str) -> list[str]:
    if _OUTSIDE_JIEBA_HAN.search(text) is None:
        return nat.cut(text, True)
    words: list[str] = []
    for piece in _JIEBA_HAN_SPLIT.split(text):
        if not piece:
            continue
        if "\u4e00" <= piece[0] <= "\u9fd5":
            words.extend(nat.cut(piece, True))
        else:
            words.extend(piece)  # jieba yields these characters (and "\n") one by one
    return words


def segment_runs(runs: list[str]) -> list[list[str]]:
    """Segment several Han runs with one call; returns the words of each run.

    Runs hold only Han characters (``simdb.core.tokenize.CJK_CLASS``) that are ``\\w``.
    """
    text = "\n".join(runs)
    nat = _native()
    # "\n" is outside jieba's Han class, so each run is segmented on its own and
    # comes back delimited by a "\n" word.
    words = _cut_native(nat, text) if nat is not None else jieba_tokenizer().cut(text, cut_all=False, HMM=True)
    out: list[list[str]] = []
    cur: list[str] = []
    for w in words:
        if w == "\n":
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    out.append(cur)
    return out


def _load_in_worker() -> None:
    """Load the segmenter in a new pool worker, once, not in its first task's time."""
    segment_runs(["中文"])


parallel.on_worker_start(_load_in_worker)
