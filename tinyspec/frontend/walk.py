"""Iterative graph walks over UOps (graphs may be 100,000-node chains: no recursion)."""
from __future__ import annotations
from tinyspec import rewrite, uop
from tinyspec.uop import UOp
from tinyspec.tables import tables


def toposort(roots, stop=()) -> list[UOp]:
  """Every UOp reachable from roots, sources first. Nodes in `stop` are listed but not
  entered."""
  stop_ids = {id(u) for u in stop}
  return uop.toposort(roots, srcs=lambda u: () if id(u) in stop_ids else u.src)


def substitute(roots, mapping: dict) -> list[UOp]:
  """Rebuild roots with every UOp `u` in mapping (keyed by id(u)) replaced by
  mapping[id(u)][1] (tinyspec/rewrite.py substitute). Closed function bodies (`kind: body`
  slots in ops.yaml: FUNCTION's and CALL's src[0]) are kept as they are: a PARAM inside
  one refers to that function's own arguments."""
  return rewrite.substitute(list(roots), {u: new for u, new in mapping.values()}, enter=_outside_bodies)


def _outside_bodies(u: UOp, k: int) -> bool:
  """Is source k of u outside a closed function body?"""
  od = tables().ops.get(u.op)
  return od is None or k not in od.body_slots
