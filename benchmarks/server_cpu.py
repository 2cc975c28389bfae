"""CPU seconds the PostgreSQL server spent, read from ``/proc`` (Linux), for CPU budgets of loads.

Why: on a machine with few cores the server's COPY and index builds run on the same cores as
the fingerprinting processes, so a wall-clock ratio of two loads is bounded by the CPU each
text costs *in all processes*, the server's included. A benchmark that measures that CPU can
print the best ratio any schedule could reach on this machine next to the one it measured.

How: the server's CPU is the postmaster's own, its live children's (backends, background
writer, WAL writer, checkpointer) and its reaped children's (``cutime``/``cstime``: parallel
index-build workers that exited). Differences of two readings count what happened between.
Reading ``/proc/<pid>/stat`` of another user's process needs no privilege.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["postmaster_pid", "server_cpu_seconds"]

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def postmaster_pid(conn) -> int | None:
    """Pid of the postmaster of ``conn``'s server, if it runs on this machine (else None)."""
    try:
        backend = int(conn.info.backend_pid)
        parent = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return parent


def _times(pid: int) -> tuple[float, float]:
    """(own user+system, reaped children's user+system) seconds of ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # fields[0] is the state (field 3 of stat): utime, stime, cutime, cstime are fields 14-17
    own = (int(fields[11]) + int(fields[12])) / _TICK
    reaped = (int(fields[13]) + int(fields[14])) / _TICK
    return own, reaped


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            kids.extend(int(x) for x in (task / "children").read_text().split())
        except OSError:
            continue
    return kids


def server_cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds used so far by the server whose postmaster is ``pid`` (None if unknown)."""
    if pid is None:
        return None
    try:
        own, reaped = _times(pid)
        total = own + reaped
        for child in _children(pid):
            try:
                total += _times(child)[0]
            except OSError:  # exited between the listing and the read: its time is in ``reaped`` next time
                continue
    except OSError:
        return None
    return total
