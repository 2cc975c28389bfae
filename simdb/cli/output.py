"""What the commands print: lines, JSON, aligned tables and a progress line.

stdout carries the answer (text or JSON, so that it can be piped); stderr carries
errors, warnings and progress, which never mix into the answer.

Keys and other data are someone else's text and may reach a terminal (a key
holding ``ESC ] 0;`` could retitle the terminal, ``\r`` or U+202E disguise a line). Everything
written for people (:func:`out`, :func:`err`, :func:`table`) goes through :func:`shown`, which
writes control characters (C0, DEL, C1) and the bidirectional-text controls as escapes
(``\x1b``, ``\u202e``); a newline inside a key is escaped too where the key is shown
(:func:`shown` on the value), line breaks between lines of a message are kept. JSON and CSV
are data formats for programs and keep every value exact: JSON escapes C0 characters itself, and
:func:`print_json` writes DEL, C1 and the bidi controls as ``\\uXXXX`` too (the same value for
any JSON reader, harmless on a terminal); CSV has no escapes and writes them as they are.
"""

from __future__ import annotations

import csv
import json
import re
import sys
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["shown", "out", "err", "print_json", "print_json_stream", "print_csv", "table", "human_bytes", "Progress"]


#: what a terminal could act on besides the C0 controls: DEL, C1 controls (\x9b is a CSI), the bidi controls
#: (embeddings, overrides, isolates, marks, the Arabic letter mark) and the line/paragraph separators
_ACTIVE = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f{_ACTIVE}]")
_UNSAFE_BUT_NEWLINE = re.compile(f"[\x00-\x09\x0b-\x1f{_ACTIVE}]")


_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match) -> str:
    if m.group() in _SHORT:
        return _SHORT[m.group()]
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def shown(value: object, lines: bool = False) -> str:
    """``value`` as text safe to show on a terminal: control and bidi characters as escapes
    (``\x1b``, ``\r``, ``\u202e``); with ``lines``, newlines are kept (a message of several lines)."""
    return (_UNSAFE_BUT_NEWLINE if lines else _UNSAFE).sub(_escape, str(value))


def out(text: str = "") -> None:
    sys.stdout.write(shown(text, lines=True) + "\n")


def err(text: str) -> None:
    sys.stderr.write(shown(text, lines=True) + "\n")
    sys.stderr.flush()


#: what JSON (ensure_ascii=False) leaves raw but a terminal could act on; only ever inside JSON strings
_UNSAFE_IN_JSON = re.compile(f"[{_ACTIVE}]")


def _json(value: Any, **kwargs: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str, **kwargs)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def print_json(value: Any) -> None:
    sys.stdout.write(_json(value, indent=2))
    sys.stdout.write("\n")


def print_json_stream(items: Iterable) -> None:
    """A JSON array written item by item (bounded memory for large answers)."""
    first = True
    sys.stdout.write("[")
    for item in items:
        sys.stdout.write("\n  " if first else ",\n  ")
        sys.stdout.write(_json(item))
        first = False
    sys.stdout.write("\n]\n" if not first else "]\n")


def print_csv(header: list[str], rows: Iterable[list]) -> None:
    """CSV on stdout, a row at a time (bounded memory), values as they are (see the module doc)."""
    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)


def table(headers: list[str], rows: list[list], right: Iterable[int] = ()) -> str:
    """Columns padded to their widest cell; the ``right`` columns (numbers) right-aligned."""
    right = set(right)
    cells = [[shown(c) for c in r] for r in rows]
    widths = [len(h) for h in headers]
    for r in cells:
        for i, c in enumerate(r):
            widths[i] = max(widths[i], len(c))

    def fmt(r):
        parts = [(c.rjust(widths[i]) if i in right else c.ljust(widths[i])) for i, c in enumerate(r)]
        return "  ".join(parts).rstrip()

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines += [fmt(r) for r in cells]
    return "\n".join(lines)


def counted(n: int, noun: str) -> str:
    """``1 text``, ``2 texts``, ``1,000 texts``: the CLI's counts read as English."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


class Progress:
    """A one-line progress display with a rate, on stderr, for work that takes more than half a second.

    ``always``: also show the final line for work that finished sooner (``--progress`` asked for it).
    """

    def __init__(self, enabled: bool, label: str, total_bytes: int | None = None, interval: float = 0.2,
                 *, always: bool = False):
        self.enabled = enabled
        self.always = always
        self.label = label
        self.total_bytes = total_bytes or None
        self.interval = interval
        self.items = 0
        self.bytes = 0
        self.start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, items: int = 0, nbytes: int = 0) -> None:
        self.items += items
        self.bytes += nbytes
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.start < 0.5 or now - self._last < self.interval:
            return
        self._last = now
        self._render(now)

    def _render(self, now: float) -> None:
        elapsed = max(now - self.start, 1e-9)
        rate = self.items / elapsed
        line = f"{self.label} {self.items:,} texts  {rate:,.0f}/s"
        if self.total_bytes:
            frac = min(self.bytes / self.total_bytes, 1.0)
            filled = int(frac * 20)
            line += (f"  [{'#' * filled}{'.' * (20 - filled)}] {frac:4.0%}"
                     f"  {human_bytes(self.bytes)}/{human_bytes(self.total_bytes)}")
        line += f"  {elapsed:.1f}s"
        sys.stderr.write("\r" + line + "\x1b[K")
        sys.stderr.flush()
        self._shown = True

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    @property
    def rate(self) -> float:
        return self.items / max(self.elapsed, 1e-9)

    def close(self) -> None:
        if self._shown or (self.enabled and self.always and self.items):
            self._render(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._shown = False
