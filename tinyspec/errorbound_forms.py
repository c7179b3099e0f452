"""The corners of tinyspec/errorbound.py in closed form, for the elementwise ops that make up
most of a kernel (tinygrad's decomposed exp2/log2/sin are chains of them): the same largest
distance as evaluating the op at every corner of its operands' intervals, in a few nodes
instead of ~15 per corner (a shadow graph 65 times the size of the graph made every large
program too slow to judge, issue 31 S4).

Each form takes the shadow, the node and its operands' bounds (None: exact) and returns the
node of the distance in float64, or None where the corners must be evaluated after all. For
finite values each is exactly the corners' maximum; where the op's value is infinite or
NaN (judged by class, interop.compare) a form may be looser, never tighter.
"""
from __future__ import annotations
from tinyspec.dispatch import Registry
from tinyspec.dtypes import DTYPES

F64, INF = "float64", "inf"
FIRST_ORDER = Registry("first-order bound")   # op -> form(shadow, i, node, operand bounds) -> distance node or None


def at_float64_resolution(b, i, worst):
  """A form's distance as the corners measure it, in float64: a move below half a float64
  ulp of the op's value vanishes there (the corners add it to the value and see nothing),
  so it does not count as moved (which would add a rounding of the result's own dtype)."""
  floor = b.add("MUL", (b.abs(b.f64(i)), b.const(2.0 ** -53)))
  return b.add("WHERE", (b.add("CMPLT", (worst, floor)), b.const(0.0), worst))


def _cls(dt) -> str | None:
  return DTYPES[dt].cls if isinstance(dt, str) and dt in DTYPES else None


def _zero_or(b, e):
  return e if e is not None else b.const(0.0)


def _finite(b, x):
  """A NaN bound (only inf * 0: an infinite operand, whose value is judged by class) as 0."""
  return b.add("WHERE", (b.add("CMPNE", (x, x)), b.const(0.0), x))


def _numeric(b, n) -> bool:
  return all(_cls(b.views[j].dtype) in ("float", "int", "uint", "index") for j in n.src)


@FIRST_ORDER.register("ADD", "SUB")
def _sum(b, i, n, es):
  """|(a +- Ea) + (b +- Eb) - (a + b)| <= Ea + Eb, reached at a corner."""
  if not _numeric(b, n) or _cls(b.views[i].dtype) != "float": return None
  ea, eb = es
  if ea is None or eb is None: return ea if eb is None else eb
  return b.add("ADD", (ea, eb))


@FIRST_ORDER.register("NEG")
def _neg(b, i, n, es):
  return es[0] if _cls(b.views[i].dtype) == "float" else None


@FIRST_ORDER.register("MUL")
def _product(b, i, n, es):
  """|(a +- Ea)(b +- Eb) - ab| <= |a| Eb + |b| Ea + Ea Eb (bilinear: reached at a corner)."""
  if not _numeric(b, n) or _cls(b.views[i].dtype) != "float": return None
  (x, y), (ex, ey) = n.src, es
  ax, ay = b.abs(b.f64(x)), b.abs(b.f64(y))
  terms = []
  if ey is not None: terms.append(_finite(b, b.add("MUL", (ax, ey))))
  if ex is not None: terms.append(_finite(b, b.add("MUL", (ay, ex))))
  if ex is not None and ey is not None: terms.append(_finite(b, b.add("MUL", (ex, ey))))   # (inf * 0: one operand exact, no cross term)
  out = terms[0]
  for t in terms[1:]: out = b.add("ADD", (out, t))
  return out


@FIRST_ORDER.register("MAX")
def _largest(b, i, n, es):
  """With a the larger operand: max(Ea, Eb - (a - b)) (the smaller one overtaking it); where
  a - b is NaN (a NaN, equal infinities): the larger of both bounds."""
  if not _numeric(b, n) or _cls(b.views[i].dtype) != "float": return None
  (x, y), (ex, ey) = n.src, es
  ex, ey = _zero_or(b, ex), _zero_or(b, ey)
  fx, fy = b.f64(x), b.f64(y)
  gap = b.abs(b.add("SUB", (fx, fy)))
  gap = b.add("WHERE", (b.add("CMPNE", (gap, gap)), b.const(0.0), gap))
  y_larger = b.add("CMPLT", (fx, fy))
  big, small = b.add("WHERE", (y_larger, ey, ex)), b.add("WHERE", (y_larger, ex, ey))
  return b.max_(big, b.add("SUB", (small, gap)))


@FIRST_ORDER.register("WHERE")
def _select(b, i, n, es):
  """The chosen branch's bound; where the gate may flip, also the distance to the other
  branch (NaN there: unbounded)."""
  if _cls(b.views[i].dtype) != "float": return None
  (c, x, y), (ec, ex, ey) = n.src, es
  chosen = b.add("WHERE", (c, _zero_or(b, ex), _zero_or(b, ey)))
  if ec is None: return chosen
  gap = b.abs(b.add("SUB", (b.f64(x), b.f64(y))))
  gap = b.add("WHERE", (b.add("CMPNE", (gap, gap)), b.const(INF), gap))
  either = b.add("ADD", (b.max_(_zero_or(b, ex), _zero_or(b, ey)), gap))
  return b.add("WHERE", (b.add("CMPLT", (b.const(0.0), ec)), either, chosen))


@FIRST_ORDER.register("CMPLT", "CMPNE", "CMPEQ")
def _compare(b, i, n, es):
  """A comparison flips (a bool's bound 1) where the operands' intervals may cross:
  |a - b| <= Ea + Eb with Ea + Eb > 0 (NaN compares the same everywhere), or Ea + Eb is inf."""
  if not _numeric(b, n): return None
  (x, y), (ex, ey) = n.src, es
  reach = ex if ey is None else ey if ex is None else b.add("ADD", (ex, ey))
  gap = b.abs(b.add("SUB", (b.f64(x), b.f64(y))))
  near = b.add("OR", (b.add("CMPLT", (gap, reach)), b.add("CMPEQ", (gap, reach))))   # gap <= reach, false for NaN ...
  near = b.add("OR", (near, b.add("CMPEQ", (reach, b.const(INF)))))                   # ... unless anything is reachable
  flips = b.add("AND", (near, b.add("CMPLT", (b.const(0.0), reach))))
  return b.add("CAST", (flips,), F64)


@FIRST_ORDER.register("CAST")
def _convert(b, i, n, es):
  """A conversion to float moves by what its operand moved (a bool: 0 or 1)."""
  return es[0] if _cls(b.views[i].dtype) == "float" else None


@FIRST_ORDER.register("RECIP", "DIV")
def _quotient(b, i, n, es):
  """|(a +- Ea) / (b +- Eb) - a/b| <= (|a| Eb + |b| Ea) / (|b| (|b| - Eb)) where |b| > Eb,
  reached at the corner nearest the pole; where the divisor's interval reaches 0 the quotient
  is unbounded there (the corners, on both sides of the pole, would miss it: a sum that
  cancels to a tiny divisor of either sign, tinygrad's test_svd_general). RECIP: a = 1."""
  if not _numeric(b, n) or _cls(b.views[i].dtype) != "float": return None
  x, y = (None, n.src[0]) if n.op == "RECIP" else n.src
  ex, ey = (None, es[0]) if n.op == "RECIP" else es
  ay = b.abs(b.f64(y))
  if ey is None: return _finite(b, b.add("DIV", (ex, ay)))   # Ea / |b|
  top = b.const(0.0) if ex is None else _finite(b, b.add("MUL", (ay, ex)))
  ax = b.const(1.0) if x is None else b.abs(b.f64(x))
  top = b.add("ADD", (_finite(b, b.add("MUL", (ax, ey))), top))
  worst = _finite(b, b.add("DIV", (top, b.add("MUL", (ay, b.add("SUB", (ay, ey)))))))
  return b.add("WHERE", (b.add("CMPLT", (ey, ay)), worst, b.const(INF)))
