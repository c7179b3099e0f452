"""Memory safety: every kernel access is in bounds, proved or gated.

An access `INDEX(p, i0, i1, ...)` is *proved* when each index's interval lies in
[0, dim) -- its min_max, narrowed by the facts its gate states (a gate that is an AND of
`x < c` and `NOT(x < c)` clauses bounds x, and so every `k*x + c` whose mathematical
interval over the narrowed x fits the dtype: only then does it not wrap, so an int8
`x + 1` under `x >= 5` is not narrowed, 127 + 1 being -128). Otherwise the missing
`0 <= i` / `i < dim` clauses are added to its gate (decision index-oob): a read becomes
`LOAD(INDEX, 0, gate)` (reads 0 where out of range), a store gets them in its gate (writes
nothing there); a gated read `LOAD(INDEX, alt, g)` becomes `LOAD(INDEX, WHERE(g, 0, alt),
g AND bounds)`: its gate only says whether the access happens, and an index out of range
where it does still reads 0 (compiler/passes/gates.py adds them). After that no kernel can
touch memory out of bounds by its graph alone, which the reference evaluator checks; the
renderer re-proves every access
with the same facts and guards anything it cannot prove (defence in depth; ATOMICADD has
no gate slot, so its guard is the renderer's alone).
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.analysis.symbolic import linear, fits
from tinyspec.dtypes import dtype as _dt

TRUE = const(True, "bool")


def clauses(gate: UOp | None) -> list[UOp]:
  """The conjuncts of an AND tree (bool AND)."""
  if gate is None: return []
  out, stack = [], [gate]
  while stack:
    g = stack.pop()
    if g.op == "AND" and props(g).dtype == "bool": stack.extend(g.src)
    else: out.append(g)
  return out


def facts(gate: UOp | None) -> dict[UOp, tuple]:
  """x -> (lo, hi) bounds the gate guarantees when it is true."""
  out: dict[UOp, tuple] = {}
  def add(x, lo, hi):
    plo, phi = out.get(x, (None, None))
    out[x] = (lo if plo is None else max(plo, lo) if lo is not None else plo, hi if phi is None else min(phi, hi) if hi is not None else phi)
  for c in clauses(gate):
    if c.op == "CMPLT" and c.src[1].op == "CONST" and _intlike(c.src[0]): add(c.src[0], None, int(c.src[1].arg["value"]) - 1)
    elif c.op == "CMPLT" and c.src[0].op == "CONST" and _intlike(c.src[1]): add(c.src[1], int(c.src[0].arg["value"]) + 1, None)
    elif c.op == "CMPNE" and c.src[1].op == "CONST" and c.src[1].arg["value"] is True and c.src[0].op == "CMPLT":
      lt = c.src[0]
      if lt.src[1].op == "CONST" and _intlike(lt.src[0]): add(lt.src[0], int(lt.src[1].arg["value"]), None)
  return out


def _intlike(u: UOp) -> bool:
  d = props(u).dtype
  return isinstance(d, str) and _dt(d).is_int


def interval(i: UOp, known: dict) -> tuple:
  """i's interval given the facts: its own, narrowed where a fact bounds i itself, or
  x's narrowed interval mapped through i = k*x + c when that cannot wrap (a sum of
  ring ops is its mathematical value modulo 2^bits, so it is that value exactly when
  the value's interval fits the dtype)."""
  lo, hi = props(i).min_max
  f = known.get(i)
  if f is None and known:
    lf = linear(i, 4)
    if lf is not None and len(lf[0]) == 1:
      (x, k), = lf[0].items()
      if x in known:
        xlo, xhi = props(x).min_max
        flo, fhi = known[x]
        if flo is not None: xlo = max(xlo, flo)
        if fhi is not None: xhi = min(xhi, fhi)
        a, b = k * xlo + lf[1], k * xhi + lf[1]
        nlo, nhi = min(a, b), max(a, b)
        if xlo <= xhi and fits(nlo, nhi, props(i).dtype): return (max(lo, nlo), min(hi, nhi))
  if f is not None:
    if f[0] is not None: lo = max(lo, f[0])
    if f[1] is not None: hi = min(hi, f[1])
  return lo, hi


def missing(index: UOp, gate: UOp | None) -> list[UOp]:
  """The bounds clauses of INDEX(p, i...) that neither intervals nor the gate prove."""
  p = index.src[0]
  shape = props(p).shape
  known = facts(gate)
  out = []
  for i, d in zip(index.src[1:], shape):
    lo, hi = interval(i, known)
    if lo < 0: out.append(UOp("CMPNE", (UOp("CMPLT", (i, const(0, props(i).dtype))), TRUE)))
    if hi >= d: out.append(UOp("CMPLT", (i, const(d, props(i).dtype))))
  return out


def proved(index: UOp, gate: UOp | None) -> bool:
  return not missing(index, gate)
