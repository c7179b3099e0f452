"""Instances of the simplifier's rewrite rules, built from the rules' own patterns.

`instances(pat, dt, rng, kb)` builds nodes that match a rule's pattern (tinyspec/rewrite
Pat) with operands of dtype dt drawn from `operands`: loads of edge-dense buffers (the
dtype's whole range) and loads narrowed by a CAST from a narrower dtype, a MOD, an IDIV
or a MAX by a constant, a bounded symbolic size, the loop index itself -- so the
interval-driven rules see both full and narrowed intervals. `ProbeKernel` collects
expressions into one kernel (a loop over N lanes, one output per expression) that the
reference evaluator runs. Shared by tests/compiler/test_compiler_rewrites.py and the render
predicate tests.
"""
from __future__ import annotations
import random
import numpy as np
from tinyspec.uop import UOp
from tinyspec.dtypes import DTYPES
from tinyspec.validate import derive_uop, DerivationError
from tinyspec.compiler.literals import const, shape_operand as S
from tinyspec.conformance.corpus.values import edge_values, as_array

N = 64
INT_DTYPES = [n for n, d in DTYPES.items() if d.cls in ("int", "uint", "index")]
ALU = ["ADD", "MUL", "SUB", "IDIV", "MOD", "MAX", "AND", "OR", "XOR", "SHL", "SHR", "CMPLT", "CMPNE", "NEG"]
COMPARE = ("CMPLT", "CMPNE", "CMPEQ", "CMPGT", "CMPGE", "CMPLE")


def values(dt: str, rng: random.Random, n: int = N) -> np.ndarray:
  """n values of dt: every edge value, then random ones (small and over the whole range)."""
  d = DTYPES[dt]
  edges = list(edge_values(dt))
  if d.cls == "bool": vals = [rng.random() < 0.5 for _ in range(n)]
  else:
    lo, hi = int(d.min), int(d.max)
    extra = [1 << k for k in range(d.bits - 1)] + [-(1 << k) for k in range(d.bits - 1)]
    pool = [v for v in edges + extra if lo <= v <= hi]
    vals = pool[:n] + [rng.choice([rng.randint(max(lo, -40), min(hi, 40)), rng.randint(lo, hi), rng.choice(pool)]) for _ in range(n)]
    vals = rng.sample(vals[:n], min(n, len(vals[:n]))) + vals[n:2 * n]
    vals = vals[:n]
  return as_array(vals, dt)


def edge_const(dt: str, rng: random.Random):
  d = DTYPES[dt]
  if d.cls == "bool": return rng.random() < 0.5
  lo, hi = int(d.min), int(d.max)
  pool = [v for v in list(edge_values(dt)) + [1 << rng.randrange(d.bits - 1), 3, 4, 5, 8, 10, 16, 64, 100, 1000, 10000] if lo <= v <= hi]
  return rng.choice(pool + [rng.randint(max(lo, -64), min(hi, 64)), rng.randint(lo, hi)])


class ProbeKernel:
  """One kernel: RANGE r over N lanes, input PARAMs (loads at r), output PARAMs."""
  def __init__(self, rng: random.Random):
    self.rng = rng
    self.r = UOp("RANGE", (const(N, "index"),), {"id": 0, "type": "LOOP"})
    self.inputs: dict = {}
    self.slot = 0
    self.stores: list = []
    self.outputs: list = []       # (name, expression)

  def _param(self, shape, dt: str, bounds=None) -> UOp:
    srcs = (S(shape),) if bounds is None else (S(()), const(bounds[0], dt), const(bounds[1], dt))
    p = UOp("PARAM", srcs, {"slot": self.slot, "dtype": dt})
    self.slot += 1
    return p

  def load(self, dt: str) -> UOp:
    p = self._param((N,), dt)
    self.inputs[f"param{p.arg['slot']}"] = values(dt, self.rng)
    return UOp("INDEX", (p, self.r))

  def size(self, dt: str) -> UOp:
    """A symbolic size with narrow bounds, its value one of them or between."""
    d = DTYPES[dt]
    lo = self.rng.randint(max(int(d.min), -50), min(int(d.max), 50))
    hi = min(int(d.max), lo + self.rng.randint(0, 40))
    p = self._param((), dt, (lo, hi))
    self.inputs[f"param{p.arg['slot']}"] = np.asarray(self.rng.choice([lo, hi, (lo + hi) // 2]))
    return p

  def output(self, e: UOp) -> str:
    p = self._param((N,), derive_uop(e, "kernel").dtype)
    name = f"param{p.arg['slot']}"
    self.stores.append(UOp("STORE", (UOp("INDEX", (p, self.r)), e)))
    self.outputs.append((name, e))
    return name

  def sink(self) -> UOp:
    body = self.stores[0] if len(self.stores) == 1 else UOp("GROUP", tuple(self.stores))
    return UOp("SINK", (UOp("END", (body, self.r)),))

  def used_inputs(self, sink: UOp) -> dict:
    """The inputs of the PARAMs the kernel uses (instances that were dropped have others)."""
    from tinyspec.uop import toposort
    names = {f"param{u.arg['slot']}" for u in toposort(sink) if u.op == "PARAM"}
    return {k: v for k, v in self.inputs.items() if k in names}

  def evaluate(self) -> dict:
    from tinyspec.graph import Graph
    from tinyspec.refimpl import evaluate
    sink = self.sink()
    return evaluate(Graph.from_uops(sink, level="kernel"), self.used_inputs(sink))


def _narrower(dt: str) -> list[str]:
  """Integer dtypes every value of which dt holds (a CAST from them keeps the value)."""
  d = DTYPES[dt]
  return [n for n in INT_DTYPES if n != dt and DTYPES[n].min >= d.min and DTYPES[n].max <= d.max]


def operand(kb: ProbeKernel, dt: str, sums: bool = True) -> UOp:
  """A value of dt: a load (the whole range), one with a narrowed interval, or (sums) a
  linear combination k1*t1 + k2*t2 + c of such (the forms the division rules split)."""
  rng = kb.rng
  d = DTYPES[dt]
  if d.cls == "bool": return UOp("CMPLT", (kb.load("int8"), const(rng.randint(-5, 5), "int8")))
  kinds = ["load", "load", "mod", "idiv", "max", "size"] + (["cast"] if _narrower(dt) else []) + (["range"] if dt == "index" else []) + (["sum"] * 3 if sums else [])
  k = rng.choice(kinds)
  if k == "sum":
    def coef() -> int:
      c = rng.choice([1, 2, 3, 4, 8, 16, 64, 100, 1 << rng.randrange(1, d.bits - 1), -1, -4])
      return c if d.min <= c <= d.max else 1
    e = operand(kb, dt, False)
    if rng.random() < 0.8: e = UOp("MUL", (e, const(coef(), dt)))
    if rng.random() < 0.5: e = UOp("ADD", (e, UOp("MUL", (operand(kb, dt, False), const(coef(), dt)))))
    return UOp("ADD", (e, const(edge_const(dt, rng), dt))) if rng.random() < 0.7 else e
  if k == "load": return kb.load(dt)
  if k == "cast": return UOp("CAST", (kb.load(rng.choice(_narrower(dt))),), dt)
  if k == "mod": return UOp("MOD", (kb.load(dt), const(rng.randint(1, min(9, int(d.max))), dt)))
  if k == "idiv": return UOp("IDIV", (kb.load(dt), const(rng.choice([2, 3, 7, 16, 100]) if d.max >= 100 else 3, dt)))
  if k == "max": return UOp("MAX", (kb.load(dt), const(edge_const(dt, rng), dt)))
  if k == "size": return kb.size(dt)
  return kb.r if rng.random() < 0.5 else UOp("ADD", (kb.r, const(rng.randint(-40, 40), "index")))


def alu(kb: ProbeKernel, dt: str, op: str | None = None, depth: int = 0) -> UOp:
  """A random ALU node over operands of dt (op: one of ALU, or chosen here)."""
  rng = kb.rng
  op = op or rng.choice(ALU if DTYPES[dt].cls != "bool" else ["AND", "OR", "XOR", "CMPNE", "CMPLT"])
  def arg() -> UOp:
    if depth < 1 and rng.random() < 0.3: return alu(kb, dt, None, depth + 1) if DTYPES[dt].cls != "bool" else operand(kb, dt)
    return operand(kb, dt) if rng.random() < 0.7 else const(edge_const(dt, rng), dt)
  if op == "NEG": return UOp("NEG", (arg(),))
  a, b = arg(), arg()
  for _ in range(4):   # results must keep dt: a comparison of a bool-valued arm is fine
    if derive_uop(a, "kernel").dtype == dt and derive_uop(b, "kernel").dtype == dt: break
    a, b = operand(kb, dt), operand(kb, dt)
  return UOp(op, (a, b))


def instance(pat, dt: str, kb: ProbeKernel, env: dict, top: bool = True) -> UOp:
  """A node matching pattern `pat` with operands of dt (names bound in env)."""
  rng = kb.rng
  if pat.name is not None and pat.name in env: return env[pat.name]
  if pat.ops is None:
    node = alu(kb, dt) if top else operand(kb, dt)
  elif pat.ops == ("CONST",):
    node = const(edge_const(dt, rng), dt)
  else:
    op = rng.choice(pat.ops)
    if pat.src is None:
      node = alu(kb, dt, op if op in ALU + ["CMPEQ"] else None)
      if rng.random() < 0.5 and len(node.src) == 2: node = UOp(node.op, (const(edge_const(dt, rng), dt), node.src[1]))
    else:
      srcs = []
      for k, sp in enumerate(pat.src):
        sdt = dt
        if op == "WHERE" and k == 0: sdt = "bool"   # WHERE's condition is a bool (decision where-cond)
        srcs.append(instance(sp, sdt, kb, env, False))
      arg = rng.choice([dt] + _narrower(dt) + [n for n in INT_DTYPES if n not in _narrower(dt)]) if op == "CAST" else None
      node = UOp(op, tuple(srcs), arg)
  if pat.name is not None: env[pat.name] = node
  return node


def valid(u: UOp) -> bool:
  try:
    derive_uop(u, "kernel")
    return True
  except DerivationError:
    return False
