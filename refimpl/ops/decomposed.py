"""Decomposed elementwise ops (category `decomposed`) evaluated DIRECTLY with their true
semantics; tinyspec.decompose expands them into primitives, and the tests hold the two
within the op's tolerance.

EXP2, LOG2, SIN and POW are the correctly rounded results in every float dtype
(refimpl/crmath: the project's own algorithms, never a libm, so the same bits on every
host and NumPy version); decision transcendental-accuracy measures ULPs from exactly
these. SQRT, DIV and MULACC are IEEE operations computed in the dtype (float16/bfloat16
in float32, rounded once)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl import crmath
from tinyspec.refimpl.numeric import float_op, int_op, is_float, F64, NP
from tinyspec.refimpl.ops.elementwise import arith, _cmp


@unit("NEG")
def neg(ctx, x):   # integers wrap: -MIN = MIN
  return float_op(np.negative, ctx.dtype, x) if is_float(ctx.dtype) else int_op(np.negative, ctx.dtype, x)


@unit("SUB")
def sub(ctx, a, b): return arith(np.subtract, ctx.dtype, a, b)


@unit("DIV")
def div(ctx, a, b): return float_op(np.divide, ctx.dtype, a, b)


@unit("CMPGT")
def cmpgt(ctx, a, b): return _cmp(np.greater, ctx, a, b)


@unit("CMPGE")
def cmpge(ctx, a, b): return _cmp(np.greater_equal, ctx, a, b)


@unit("CMPLE")
def cmple(ctx, a, b): return _cmp(np.less_equal, ctx, a, b)


@unit("CMPEQ")
def cmpeq(ctx, a, b): return _cmp(np.equal, ctx, a, b)


@unit("NOT")
def not_(ctx, x): return np.logical_not(x)


def transcendental(fn, name, *xs):
  """crmath's fn on float operands of dtype `name`: the correctly rounded result (held
  exactly in float64, so the conversion back to the dtype is exact)."""
  return np.asarray(fn(*[x.astype(F64) for x in xs], fmt=name)).astype(NP[name])


@unit("EXP2")
def exp2(ctx, x): return transcendental(crmath.exp2, ctx.dtype, x)


@unit("LOG2")
def log2(ctx, x): return transcendental(crmath.log2, ctx.dtype, x)   # log2(±0) = -inf, log2(x<0) = NaN


@unit("SIN")
def sin(ctx, x): return transcendental(crmath.sin, ctx.dtype, x)     # sin(±inf) = NaN


@unit("SQRT")
def sqrt(ctx, x): return float_op(np.sqrt, ctx.dtype, x)         # IEEE: correctly rounded in the dtype


def pow_domain(a, b, fmt: str):
  """a^b as decision pow-domain: the correctly rounded power where a > 0 and b*log2(a)
  is finite; elsewhere exactly what EXP2(b * LOG2(a)) gives in IEEE arithmetic (a < 0 ->
  NaN, ±0^b -> 0 for b > 0 and inf for b < 0, 0^0, 1^inf and inf^0 -> NaN), which there
  is one of 0, inf and NaN: exact, whatever log2's last bit."""
  with np.errstate(all="ignore"):
    m = b * crmath.log2(a, fmt="float64")
    ordinary = (a > 0) & np.isfinite(m)
    special = crmath.exp2(np.where(ordinary, 0.0, m), fmt="float64")
  return np.where(ordinary, crmath.pow(np.where(ordinary, a, 1.0), b, fmt=fmt), special)


@unit("POW")
def pow_(ctx, a, b): return transcendental(pow_domain, ctx.dtype, a, b)


def _product(name, a, b): return arith(np.multiply, name, a, b)


@unit("MULACC", accumulates=(2, "ADD", _product))   # acc = a*b + acc: a sum of products
def mulacc(ctx, a, b, c):   # a*b rounded, then + c rounded: never fused
  name = ctx.dtype
  return arith(np.add, name, arith(np.multiply, name, a, b), c)
