"""The CLI's command dispatch: the one place where simdb imports a module when it is used.

Why: the house rule is "imports at module level" (tests/test_house.py), but
``simdb --help`` and the parser must not pay for SQLAlchemy, psycopg, numpy and
jieba (~0.8 s; issue 29, item 3). So the parser names each command's function
and the few library checks it needs through :func:`command` and :func:`lazy`,
and the entry point reaches the session through :func:`lazy_module`; each is
imported by :mod:`importlib` on first call or attribute access, after the
arguments are parsed. Nothing else in simdb imports lazily.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["command", "lazy", "lazy_module"]


def lazy(module: str, name: str) -> Callable[..., Any]:
    """A function that calls ``module.name`` (imported on the first call) with its arguments."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    call.__doc__ = f"{module}.{name}, imported when first called."
    return call


def command(module: str, name: str) -> Callable[[Any, Any], int]:
    """A subcommand's function ``(args, session) -> exit status`` from ``simdb.cli.<module>``."""
    return lazy(f"simdb.cli.{module}", name)


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
