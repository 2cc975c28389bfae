"""Regenerate examples/sample/ from the fables in examples/sample/originals/.

The originals are 22 fables from Project Gutenberg eBook #21, *Aesop's Fables*,
translated by George Fyler Townsend (public domain in the USA), one per file,
as published. The near-duplicate variants in examples/sample/variants/ are made
from them by small, deterministic edits (no new text is invented): re-wrapped
lines and straight quotes, a typo, British spellings, a dropped title or moral,
a deleted sentence, two swapped sentences. Run from the repository root:

    python examples/make_sample.py
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

SAMPLE = Path(__file__).resolve().parent / "sample"
ORIGINALS = SAMPLE / "originals"
VARIANTS = SAMPLE / "variants"


def read(name: str) -> str:
    return (ORIGINALS / f"{name}.txt").read_text(encoding="utf-8")


def rewrap(text: str, width: int) -> str:
    paras = [p.replace("\n", " ") for p in text.strip().split("\n\n")]
    return "\n\n".join(textwrap.fill(p, width) for p in paras) + "\n"


def straight_quotes(text: str) -> str:
    return text.replace("“", '"').replace("”", '"').replace("’", "'").replace("‘", "'")


def replace_once(text: str, old: str, new: str) -> str:
    if old not in text:
        raise ValueError(f"{old!r} not in text")
    return text.replace(old, new, 1)


def sentences(body: str) -> list[str]:
    return re.split(r"(?<=[.!?”])\s+(?=[A-Z“])", body)


def drop_title(text: str) -> str:
    return text.split("\n\n", 1)[1]


def drop_last_paragraph(text: str) -> str:
    return text.strip().rsplit("\n\n", 1)[0] + "\n"


VARIANT_RECIPES = {
    # layout only: re-wrapped to 100 columns and straight quotes
    "lion-and-mouse.reformatted": lambda: straight_quotes(rewrap(read("04-the-lion-and-the-mouse"), 100)),
    # one typo
    "lion-and-mouse.typo": lambda: replace_once(read("04-the-lion-and-the-mouse"), "strong ropes", "strong ropse"),
    # British spellings, as in other editions of the same translation
    "charcoal-burner.british": lambda: replace_once(
        read("05-the-charcoal-burner-and-the-fuller"), "neighbors", "neighbours"),
    # title dropped
    "father-and-sons.untitled": lambda: drop_title(read("06-the-father-and-his-sons")),
    # moral dropped
    "hare-and-tortoise.no-moral": lambda: drop_last_paragraph(read("18-the-hare-and-the-tortoise")),
    # a whole sentence deleted: looser than k=3 usually finds
    "herdsman.shortened": lambda: replace_once(
        read("17-the-herdsman-and-the-lost-bull"),
        "Terrified at the sight, he lifted his eyes and\nhis hands to heaven, and said: ",
        "He said: "),
    # two sentences swapped
    "wolf-and-crane.swapped": lambda: _swap_first_sentences(read("10-the-wolf-and-the-crane")),
    # an exact copy under another name
    "ants-and-grasshopper.copy": lambda: read("13-the-ants-and-the-grasshopper"),
}


def _swap_first_sentences(text: str) -> str:
    title, first, rest = text.split("\n\n", 2)
    parts = sentences(first.replace("\n", " "))
    parts[0], parts[1] = parts[1], parts[0]
    return title + "\n\n" + rewrap(" ".join(parts), 72) + "\n" + rest


def main() -> None:
    VARIANTS.mkdir(exist_ok=True)
    for name, recipe in VARIANT_RECIPES.items():
        (VARIANTS / f"{name}.txt").write_text(recipe(), encoding="utf-8")
    print(f"wrote {len(VARIANT_RECIPES)} variants to {VARIANTS}")
    try:
        from simdb import Fingerprinter, hamming
    except ImportError:
        return
    fingerprint = Fingerprinter().fingerprint
    originals = {p.name: fingerprint(p.read_text(encoding="utf-8")) for p in sorted(ORIGINALS.glob("*.txt"))}
    print("distance to the nearest original (default Fingerprinter):")
    for path in sorted(VARIANTS.glob("*.txt")):
        fp = fingerprint(path.read_text(encoding="utf-8"))
        name, d = min(((n, hamming(o, fp)) for n, o in originals.items()), key=lambda x: x[1])
        print(f"  {path.name:38s} {d:2d}  {name}")


if __name__ == "__main__":
    main()
