"""The one way to dispatch per op (or per any name): a Registry filled by decorators.

    BOUNDS = Registry("error bound")
    @BOUNDS.register("WHERE")                 # or .register(category="marker"), or both
    def where_bound(b, i, node): ...
    BOUNDS.get(node.op, generic)(b, i, node)  # the handler, or a fallback

Names are checked against the tables when they are op names (`ops=True`, the default), so
a handler for an op the tables do not have fails at import, not at the first graph that
reaches it. refimpl's `@unit` is this pattern with the unit's own fields.
"""
from __future__ import annotations
from typing import Callable
from tinyspec.tables import tables


class Registry:
  def __init__(self, what: str, ops: bool = True):
    self.what, self.ops = what, ops
    self.handlers: dict[str, Callable] = {}

  def register(self, *names: str, category: str | None = None) -> Callable:
    """Register the decorated function for `names` and every op of `category`."""
    def deco(fn):
      keys = list(names)
      if category is not None:
        keys += tables().ops_in(category)
      for k in keys:
        if self.ops:
          if k not in tables().ops: raise KeyError(f"{self.what} handler for {k!r}, which is not an op of spec/ops.yaml")
        if k in self.handlers: raise KeyError(f"two {self.what} handlers for {k!r}")
        self.handlers[k] = fn
      return fn
    return deco

  def get(self, name: str, default=None):
    return self.handlers.get(name, default)

  def __getitem__(self, name: str):
    try: return self.handlers[name]
    except KeyError: raise KeyError(f"no {self.what} handler for {name!r}") from None

  def __contains__(self, name: str) -> bool: return name in self.handlers

  def names(self) -> list[str]: return sorted(self.handlers)


def input_name(op: str, arg: dict) -> str:
  """The name an input or output of storage node (op, arg) is known by in files, `evaluate`
  and the runtimes: its `name` if it has one, else buf{slot} (a BUFFER) or param{slot}
  (a kernel's PARAM), as protocol.md (`tinyspec docs`) names a run's inputs."""
  name = arg.get("name") if isinstance(arg, dict) else None
  if name: return name
  return f"{'buf' if op == 'BUFFER' else 'param'}{arg['slot']}"
