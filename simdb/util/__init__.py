"""Plumbing: processes and files, below the near-duplicate algorithm (``simdb.core``).

Why a package of its own: pid files, files written whole, files read only inside a chosen folder,
private directories, the process pool and its helpers' exit are not the algorithm, and they are
what every layer above needs alike. The layers contract in pyproject.toml keeps it the lowest
layer: it imports nothing of simdb but :mod:`simdb.errors`."""
