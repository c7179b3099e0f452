"""Which accumulator updates may be fused multiply-adds (spec/render.yaml `contract`).

A float REDUCE(ADD) of products, acc + a*b, fused into fma(a, b, acc), rounds once
instead of twice: within REDUCE's tolerance. It may not change which results are NaN or
infinite, and it would where a product overflows when rounded but not exactly (1e30 *
1e10 in float32: -inf + inf is NaN, -inf + 1e40 is -inf), or where a partial sum
crosses the largest finite value one way and not the other. So an update is fused only
where the operands' intervals prove neither can happen: then both ways add finite
products into finite sums, or meet the same infinities and NaNs of infinite or NaN
operands.
"""
from __future__ import annotations
import math
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.props import props


def finite_bound(u: UOp) -> float:
  """A bound on |v| for every finite value v of u (inf where none is known): its interval
  where that is finite, the finite range of its dtype, and through a CAST the bound of
  what it converts (float16 -> float32: 65504; a rounding cast may add half an ulp)."""
  D = _dt(props(u).dtype)
  mm = props(u).min_max
  b = max(abs(float(mm[0])), abs(float(mm[1]))) if mm and all(math.isfinite(float(x)) for x in mm) else math.inf
  if D.cls == "float":
    b = min(b, D.normal_range[1])
    if u.op == "CAST" and u.src and isinstance(props(u.src[0]).dtype, str) and _dt(props(u.src[0]).dtype).cls in ("float", "int", "uint", "index"):
      b = min(b, finite_bound(u.src[0]) * (1 + 2.0 ** -D.mantissa))
  return b


def cannot_overflow(terms: list, dt: str, trips: int) -> bool:
  """Do the operands' intervals prove that no product among `terms` (an update's addends:
  MULs and others), and no partial sum of them over `trips` updates, rounded or not,
  leaves dt's finite range?"""
  D = _dt(dt)
  per = sum(finite_bound(t.src[0]) * finite_bound(t.src[1]) if t.op == "MUL" else finite_bound(t) for t in terms)
  n = trips * len(terms)
  drift = n * 2.0 ** -D.mantissa       # each rounded step may grow a partial sum by at most this factor, in all
  return drift < 1 and per * n * math.exp(2 * drift) < D.normal_range[1]
