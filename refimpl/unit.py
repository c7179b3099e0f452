"""Units: one small function per op (or per op category), found by op name.

    @unit("ADD")                      def add(ctx, a, b): ...
    @unit(category="marker")          def marker(ctx, x): ...

A unit gets a NodeCtx (the node's derived properties, its arg and the machine running it)
and the values of the node's sources, and returns the node's value. The units live in
refimpl/ops/ (one module per op family); refimpl/registry.py loads them all.
"""
from __future__ import annotations
from dataclasses import dataclass
from tinyspec.tables import tables

LEVELS = ("tensor", "kernel", "program")


@dataclass(frozen=True)
class Unit:
  op: str
  fn: object
  levels: frozenset     # the levels this unit can evaluate (intersected with the table's)
  raw: bool = False     # the unit reads the scope itself instead of taking source values
  role: str | None = None   # what the engine's static analysis needs to know (see ROLES)
  accumulates: tuple | None = None   # (slot of the accumulator or None for either, reduce op, contribution fn)
  alloc: float = 1.0    # bytes it allocates per result byte, for the budget estimate (0: returns a view)


# Roles a unit can declare for the engine's static analysis (refimpl/plan.py):
ROLES = {
  "storage": "a storage root (buffer): reads give its contents, STOREs target it",
  "through": "passes storage through to its consumers (INDEX, markers): a chain link",
  "view": "a typed byte view of storage (BUFFER_VIEW): a chain link",
  "after": "the storage in src[0] as ordered after src[1:] (AFTER)",
  "store": "writes through the storage chain in src[0] (STORE, ATOMICADD)",
  "gated_load": "reads src[0] where the gate in src[2] is true (LOAD)",
  "loop": "opens a loop axis (RANGE, SPECIAL)",
  "close": "void: closes the loops of its RANGE sources (END)",
  "reduce": "reads src[0] and closes the loops of its RANGE sources (REDUCE)",
  "barrier": "workgroup barrier: closes the local-thread axes of what it orders",
  "if": "opens a conditional block (IF)",
  "endif": "closes the block of its IF (ENDIF)",
  "effect": "void: merges the effects of its sources (GROUP)",
  "sink": "void: the end of a kernel or program, after every loop (SINK, LINEAR, PROGRAM, SOURCE)",
  "call": "evaluates a body (FUNCTION, CALL)",
}
# the roles of effects: what depends on one is ordered after it, not inside its IF block
EFFECT_ROLES = frozenset({"store", "effect", "close", "barrier"})


UNITS: dict[str, Unit] = {}


def unit(*ops: str, category: str | None = None, levels=LEVELS, raw: bool = False, role: str | None = None, accumulates=None, alloc: float = 1.0):
  """Register fn for the named ops and/or every op of a table category."""
  def deco(fn):
    names = list(ops)
    if category is not None: names += tables().ops_in(category)
    for name in names:
      if name not in tables().ops: raise KeyError(f"unit for {name!r}, which is not in spec/ops.yaml")
      if role is not None and role not in ROLES: raise KeyError(f"unknown role {role!r}")
      UNITS[name] = Unit(name, fn, frozenset(levels), raw, role, accumulates, alloc)
    return fn
  return deco


def role(op: str) -> str | None:
  u = UNITS.get(op)
  return None if u is None else u.role
