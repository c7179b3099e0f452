"""Stage 5, instruction selection: every op becomes one the target renders.

A decomposed op (ops.yaml category `decomposed`) stays when spec/render.yaml has a case
for it on the target and the node's dtypes (NEG, SUB, the comparisons, DIV, SQRT, EXP2,
... are native C / OpenCL operators or libm calls whose results meet the table's
tolerances); otherwise it is replaced by its table decomposition
(`tinyspec.decompose.decompose`, e.g. THREEFRY). Any other op without a rule is refused
with rule compile.unsupported. Every memory access not proved in bounds gets its bounds
check as a gate (compiler/passes/gates.py).
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.compiler.errors import CompileError
from tinyspec.tables import tables
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite
from tinyspec.decompose import decompose, decomposed_ops, DecompositionError
from tinyspec.compiler.passes.gates import gate_memory
from tinyspec.compiler.rendertables import category, render_tables
from tinyspec.compiler import render as R


def isel(sink: UOp, target: str, kind: str | None = None) -> UOp:
  nodes = toposort(sink)
  need = {u.op for u in nodes if category(u.op) == "decomposed" and not (u.op in render_tables()["ops"] and R.select_case(u, target, kind) is not None)}
  if need:
    missing = sorted(need - decomposed_ops())
    if missing: raise CompileError("compile.unsupported", f"{', '.join(missing)} has no render rule for {target} and no decomposition")
    try:
      sink = decompose(sink, ops=need)
    except DecompositionError as e:
      raise CompileError("compile.unsupported", f"cannot decompose {', '.join(sorted(need))}: {e}") from None
  sink = gate_memory(graph_rewrite(sink, VALUE_LOADS, once=True))
  for u in toposort(sink):
    if u.op in render_tables()["ops"] and R.select_case(u, target, kind) is None:
      raise CompileError("compile.unsupported", f"{u.op} has no {target} rule for its dtypes", u)
  return sink


def _storage_root(u: UOp) -> bool:
  """Does u read memory (INDEX/AFTER/... down to a storage op, per the tables' `storage`)?"""
  ops = tables().ops
  while ops[u.op].storage == "through" and u.src: u = u.src[0]
  return ops[u.op].storage is True


def load_of_value(x: UOp):
  """A LOAD of a computed value (not of memory) is the value itself, or WHERE(gate, value,
  alt) when gated: there is no address to read through."""
  if _storage_root(x.src[0]): return None
  if len(x.src) == 3: return UOp("WHERE", (x.src[2], x.src[0], x.src[1]))
  return x.src[0]


VALUE_LOADS = RuleSet([Rule("load_of_value", Pat("LOAD", name="x"), load_of_value)], "value_loads")
