"""Bounds gates: every memory access that compiler/analysis/bounds.py does not prove in
bounds gets the missing clauses in its gate (decision index-oob), one rule per access kind:

  gate_store   STORE(INDEX(PARAM, i...), v[, g])  -> the clauses join its gate (writes nothing there)
  gate_load    LOAD(INDEX(PARAM, i...), alt, g)   -> LOAD(INDEX, WHERE(g, 0, alt), g AND clauses):
               its gate only says whether the access happens; out of range it still reads 0
  gate_read    a read INDEX(PARAM, i...) used as a value -> LOAD(INDEX, 0, clauses)

Applied once per node, bottom-up (rangeify's kernels, and isel after decompositions).
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.analysis.bounds import missing
from tinyspec.compiler.analysis.parallel import WRITES
from tinyspec.compiler.analysis.symbolic import simplify


def _and(gate: UOp | None, extra: list[UOp]) -> UOp:
  g = gate
  for c in extra: g = c if g is None else UOp("AND", (g, c))
  return simplify(g)


def _zero(index: UOp) -> UOp:
  dt = props(index).dtype
  return const(False if _dt(dt).cls == "bool" else 0, dt)


def _of_param(x: UOp) -> bool: return x.op == "INDEX" and x.src[0].op == "PARAM"


def gate_store(x: UOp):
  """A store's unproved bounds join its gate (a store without one gets one)."""
  if not _of_param(x.src[0]): return None
  gate = x.src[2] if len(x.src) == 3 else None
  extra = missing(x.src[0], gate)
  return x.replace(src=(x.src[0], x.src[1], _and(gate, extra))) if extra else None


def gate_load(x: UOp):
  """A gated read's unproved bounds join its gate; where the gate holds but the index is
  out of range the read is 0, not the alternative."""
  if not _of_param(x.src[0]) or len(x.src) != 3: return None
  extra = missing(x.src[0], x.src[2])
  if not extra: return None
  alt = x.src[1] if x.src[1] is _zero(x.src[0]) else simplify(UOp("WHERE", (x.src[2], _zero(x.src[0]), x.src[1])))
  return x.replace(src=(x.src[0], alt, _and(x.src[2], extra)))


def gate_read(x: UOp):
  """Reads of x's sources (an INDEX used as a value, not the place x accesses) that are
  not proved in bounds become gated LOADs (the accesses gate_store and gate_load gate are theirs)."""
  if (x.op == "STORE" and _of_param(x.src[0])) or (x.op == "LOAD" and _of_param(x.src[0]) and len(x.src) == 3): return None
  src = list(x.src)
  for k, s in enumerate(x.src):
    if not _of_param(s) or _is_address(x, k): continue
    extra = missing(s, None)
    if extra: src[k] = UOp("LOAD", (s, _zero(s), _and(None, extra)))
  return x.replace(src=tuple(src)) if any(a is not b for a, b in zip(src, x.src)) else None


def _is_address(u: UOp, k: int) -> bool:
  """Is source k of u the place it accesses (not a value it reads)?"""
  return k == 0 and (u.op in WRITES or u.op in ("LOAD", "AFTER"))


GATES = RuleSet([Rule("gate_store", Pat("STORE", name="x"), gate_store), Rule("gate_load", Pat("LOAD", name="x"), gate_load),
                 Rule("gate_read", Pat.var("x"), gate_read)], "gates")


def gate_memory(sink: UOp) -> UOp:
  """Add every unproved bounds clause to its access's gate (see the module doc)."""
  return graph_rewrite(sink, GATES, once=True)
