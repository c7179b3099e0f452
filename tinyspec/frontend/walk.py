"""Iterative graph walks over UOps (graphs may be 100,000-node chains: no recursion)."""
from __future__ import annotations
from tinyspec import uop
from tinyspec.uop import UOp
from tinyspec.tables import tables


def toposort(roots, stop=()) -> list[UOp]:
  """Every UOp reachable from roots, sources first. Nodes in `stop` are listed but not
  entered."""
  stop_ids = {id(u) for u in stop}
  return uop.toposort(roots, srcs=lambda u: () if id(u) in stop_ids else u.src)


def substitute(roots, mapping: dict) -> list[UOp]:
  """Rebuild roots with every UOp `u` in mapping (keyed by id(u)) replaced by
  mapping[id(u)][1]. Closed function bodies (`kind: body` slots in ops.yaml: FUNCTION's
  and CALL's src[0]) are kept as they are: a PARAM inside one refers to that function's
  own arguments."""
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
    bodies = _body_slots(u)
    src = tuple(s if k in bodies else new[id(s)] for k, s in enumerate(u.src))
    new[id(u)] = u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=src)
  return [new[id(r)] for r in roots]


def _body_slots(u: UOp) -> tuple:
  od = tables().ops.get(u.op)
  return od.body_slots if od is not None else ()


def _open_src(u: UOp) -> tuple:
  """The sources a substitution enters: all but closed function bodies."""
  od = tables().ops.get(u.op)
  return od.open_src(u.src) if od is not None else u.src
