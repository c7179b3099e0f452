"""Hash-consed UOps: building the same (op, src, arg) twice gives the same object.

A UOp carries what a graph-file node carries (declared dtype/shape and tag included), so
Graph.from_uops / Graph.uops convert losslessly. Derived properties are the derivation's
(tinyspec/props.py: spec/derived.yaml's rules, each node derived once from its sources'
properties), cached in `_props`; the validator and the front end's node-by-node checks
store the Views they derive there too.
"""
from __future__ import annotations
import weakref
from typing import Any
from tinyspec.frozen import freeze, thaw, key as _key
from tinyspec.props import props as _derive_props

_cache: "weakref.WeakValueDictionary[tuple, UOp]" = weakref.WeakValueDictionary()


def toposort(*roots, srcs=None) -> list["UOp"]:
  """Every UOp reachable from roots (UOps, or lists of them), each once, sources first, in
  the order the roots and their sources are listed; srcs(u) names the sources to follow
  (default: all of u.src). Iterative: chains of any length. The one graph walk: every
  pass, checker and front end walks through it."""
  flat = [r for x in roots for r in ((x,) if isinstance(x, UOp) else x)]
  seen: set[int] = set()
  out: list = []
  stack = [(r, False) for r in reversed(flat)]
  while stack:
    u, expanded = stack.pop()
    if expanded:
      out.append(u); continue
    if id(u) in seen: continue
    seen.add(id(u))
    stack.append((u, True))
    for s in reversed(u.src if srcs is None else srcs(u)):
      if id(s) not in seen: stack.append((s, False))
  return out


def fold_up(u: "UOp", memo: dict, f):
  """f(x, [memo[s] for s in x.src]) for u and every node below it that `memo` does not
  hold yet, sources first (iterative: no recursion limit); `memo` keeps the answers, so
  later calls stop at nodes already known. Returns memo[u]. The one bottom-up fold."""
  stack = [u]
  while stack:
    x = stack[-1]
    if x in memo: stack.pop(); continue
    todo = [s for s in x.src if s not in memo]
    if todo: stack.extend(todo); continue
    stack.pop()
    memo[x] = f(x, [memo[s] for s in x.src])
  return memo[u]


class UOp:
  __slots__ = ("op", "src", "arg", "dtype", "shape", "tag", "name", "_props", "_checked", "__weakref__")
  op: str
  src: tuple["UOp", ...]
  arg: Any
  dtype: Any           # a declared dtype (a name or a tuple's), or None
  shape: Any           # a declared shape, or None
  tag: Any
  name: str | None
  _props: Any          # the derived View, once asked for
  _checked: bool       # whether _props came from the validator's checks (derive_uop), not props() alone

  def __new__(cls, op: str, src: tuple = (), arg=None, dtype=None, shape=None, tag=None, name=None):
    src = tuple(src)
    arg = freeze(arg)
    k = (op, src, _key(arg), dtype if dtype is None or type(dtype) is str else _key(dtype),
         None if shape is None else _key(shape), None if tag is None else _key(tag), name)
    if (hit := _cache.get(k)) is not None: return hit
    self = object.__new__(cls)
    self.op, self.src, self.arg, self.dtype, self.shape, self.tag, self.name = op, src, arg, dtype, shape, tag, name
    self._props, self._checked = None, False
    _cache[k] = self
    return self

  def replace(self, **kw) -> "UOp":
    d = dict(op=self.op, src=self.src, arg=self.arg, dtype=self.dtype, shape=self.shape, tag=self.tag, name=self.name)
    d.update(kw)
    return UOp(**d)

  def toposort(self) -> list["UOp"]:
    """Every UOp reachable from self, sources first (iterative: no recursion limit)."""
    return toposort(self)

  @property
  def props(self):
    """Derived properties (a View: dtype, shape, device, addrspace, min_max, axis), by
    tinyspec.props.props: derived, not checked (tinyspec.validate checks); raises
    tinyspec.props.DerivationError (a ValueError) where a rule refuses a node."""
    return self._props if self._props is not None else _derive_props(self)

  def __repr__(self) -> str:
    arg = "" if self.arg is None else f", arg={thaw(self.arg)!r}"
    return f"UOp({self.op}, src=<{len(self.src)}>{arg})"

  def __reduce__(self):   # pickles rebuild through the cache, keeping hash-consing
    return (UOp, (self.op, self.src, thaw(self.arg), self.dtype, self.shape, self.tag, self.name))
