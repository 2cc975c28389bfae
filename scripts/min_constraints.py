"""Print pip constraints pinning every dependency to the lowest version pyproject.toml allows.

Reads ``[project] dependencies`` and the extras named on the command line
(default: flask, django) and turns each ``name>=X`` into ``name==X``; a
requirement with extras (``psycopg[binary]>=3.1``) also pins the extra's
distribution of the same version where that is how the project ships it
(``psycopg-binary``). Used by scripts/check-min-versions.sh.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# extras that are separate distributions released in lockstep with their parent
LOCKSTEP = {("psycopg", "binary"): "psycopg-binary"}


def floors(pyproject: Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    reqs = list(project["dependencies"])
    for extra in extras:
        reqs += project["optional-dependencies"][extra]
    pins: dict[str, str] = {}
    for req in reqs:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)(?:\[([a-z0-9_,-]+)\])?\s*>=\s*([0-9][0-9A-Za-z.]*)(?:,.*)?", req.strip())
        if m is None:
            raise SystemExit(f"cannot read a lower bound from requirement {req!r}")
        name, extra_names, version = m.group(1).lower(), m.group(2), m.group(3)
        pins[name] = version
        for extra in (extra_names or "").split(","):
            if (name, extra) in LOCKSTEP:
                pins[LOCKSTEP[name, extra]] = version
    return [f"{name}=={version}" for name, version in sorted(pins.items())]


if __name__ == "__main__":
    root = Path(__file__).resolve().parents[1]
    print("\n".join(floors(root / "pyproject.toml", sys.argv[1:] or ["flask", "django"])))
