"""Iterative graph walks over UOps (graphs may be 100,000-node chains: no recursion)."""
from __future__ import annotations
from tinyspec.uop import UOp

# Ops whose src[0] is a closed function body: its PARAMs belong to it, not to whoever
# walks the graph around it. (CALL and FUNCTION share the call family's slot layout.)
_BODY_OPS = ("FUNCTION", "CALL")


def toposort(roots, stop=()) -> list[UOp]:
  """Every UOp reachable from roots, sources first. Nodes in `stop` are listed but not
  entered."""
  stop_ids = {id(u) for u in stop}
  order, seen = [], set()
  stack = [(r, False) for r in reversed(list(roots))]
  while stack:
    u, done = stack.pop()
    if done: order.append(u); continue
    if id(u) in seen: continue
    seen.add(id(u))
    stack.append((u, True))
    if id(u) not in stop_ids:
      stack.extend((s, False) for s in reversed(u.src) if id(s) not in seen)
  return order


def substitute(roots, mapping: dict) -> list[UOp]:
  """Rebuild roots with every UOp `u` in mapping (keyed by id(u)) replaced by
  mapping[id(u)][1]. Closed function bodies (src[0] of FUNCTION/CALL) are kept as they
  are: a PARAM inside one refers to that function's own arguments."""
  new: dict[int, UOp] = {}
  order = []
  stack = [(r, False) for r in reversed(list(roots))]
  while stack:
    u, done = stack.pop()
    if done: order.append(u); continue
    if id(u) in new: continue
    if id(u) in mapping: new[id(u)] = mapping[id(u)][1]; continue
    new[id(u)] = None   # visiting
    stack.append((u, True))
    stack.extend((s, False) for s in reversed(_open_src(u)) if id(s) not in new)
  for u in order:
    opened = _open_src(u)
    src = u.src[:len(u.src) - len(opened)] + tuple(new[id(s)] for s in opened)
    new[id(u)] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
  return [new[id(r)] for r in roots]


def _open_src(u: UOp) -> tuple:
  """The sources a substitution enters: all but a closed function body."""
  return u.src[1:] if u.op in _BODY_OPS else u.src
