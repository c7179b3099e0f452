"""Entry-point lookup: how the core finds what higher layers provide without importing them.

Backends (group `tinyspec.backends`) and subcommands (group `tinyspec.commands`) are named
in pyproject.toml's entry points, by tinyspec itself and by any other installed package;
the core reads the names here and loads an entry only when it is used.
"""
from __future__ import annotations
from functools import lru_cache
from importlib.metadata import entry_points as _eps


@lru_cache(maxsize=None)
def entry_points(group: str) -> dict:
  """name -> importlib.metadata.EntryPoint of an entry point group (first one wins)."""
  out: dict = {}
  for ep in _eps(group=group):
    out.setdefault(ep.name, ep)
  return out
