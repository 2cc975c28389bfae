"""The one place where simdb imports a module when it is used: the CLI's lazy modules.

Why: the house rule is "imports at module level" (tests/test_house.py), but
``simdb --help``, the parser and the thin client must not pay for SQLAlchemy,
psycopg, numpy and jieba (~0.8 s). So they name what they need through
:func:`lazy_module`: the parser each command's module and the library checks of
its options, the entry point the session, the thin client the entry point. Each
is imported on its first attribute access, after the arguments are parsed.
Nothing else in simdb imports lazily.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

__all__ = ["lazy_module"]


def lazy_module(name: str) -> ModuleType:
    """``name`` as a module object that is imported on its first attribute access."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ImportError(name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
