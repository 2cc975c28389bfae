"""Reading permissions in the tests of simdb's private files and directories (with the
``loose_umask`` fixture of tests/conftest.py)."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def mode_of(path: Path) -> int:
    """The permission bits of ``path`` itself (a link's own, not its target's)."""
    return stat.S_IMODE(os.lstat(path).st_mode)
