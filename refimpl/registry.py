"""Every unit of refimpl/ops, loaded, and what they support. `supported_ops()` is computed
from what is registered and the levels the tables allow, never listed."""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.refimpl.unit import UNITS, Unit, ROLES, EFFECT_ROLES, LEVELS, unit, role   # noqa: F401  (re-exported)
from tinyspec.refimpl import ops as _ops   # noqa: F401  (importing the package registers every unit)


def supported_ops() -> dict[str, set[str]]:
  """op name -> the levels the reference evaluator handles it at. Untrusted ops have no
  semantics to run, so they are never supported (see refimpl.engine)."""
  T = tables()
  out = {}
  for name, u in UNITS.items():
    op = T.ops[name]
    if op.untrusted: continue
    lv = set(op.levels) & set(u.levels)
    if lv: out[name] = lv
  return out
