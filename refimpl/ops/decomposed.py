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
from tinyspec.refimpl.numeric import float_op, int_op, is_float, F64, NP, SATURATING, broadcast_shape, from_f64, to_saturating
from tinyspec.refimpl.ops.elementwise import arith, _cmp
from tinyspec.refimpl.crmath.dd import two_prod, two_sum


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
def cmpge(ctx, a, b): return ~_cmp(np.less, ctx, a, b)     # NOT(a < b) as the Dialect document defines it: true with a NaN (decision cmp-nan)


@unit("CMPLE")
def cmple(ctx, a, b): return ~_cmp(np.less, ctx, b, a)     # NOT(b < a), as CMPGE


@unit("CMPEQ")
def cmpeq(ctx, a, b): return _cmp(np.equal, ctx, a, b)


@unit("NOT")
def not_(ctx, x): return np.logical_not(x)


def _overflow_as_finite(r, xs) -> np.ndarray:
  """r with each infinity that finite nonzero operands gave (an overflow, not a pole such as
  LOG2(0) or POW(0, -1)) replaced by the largest float64 of its sign."""
  r = np.asarray(r, F64)
  ordinary = np.ones(r.shape, bool)
  for x in xs: ordinary = ordinary & np.isfinite(x.astype(F64)) & (x.astype(F64) != 0)
  return np.where(np.isinf(r) & ordinary, np.copysign(np.finfo(F64).max, r), r)


def transcendental(fn, name, *xs):
  """crmath's fn on float operands of dtype `name`: the correctly rounded result (held
  exactly in float64, so the conversion back to the dtype is exact). A float8 dtype
  converts float64's correctly rounded result (decision fp8-convert: tinygrad's PYTHON
  device computes in Python floats, then float_to_fp8), an overflow of finite nonzero
  operands saturating like any finite value past the largest."""
  if name in SATURATING: return to_saturating(_overflow_as_finite(fn(*[x.astype(F64) for x in xs], fmt="float64"), xs), name)
  shape = broadcast_shape(*(np.shape(x) for x in xs))
  flat = [np.broadcast_to(x, shape).reshape(-1) for x in xs]
  out = np.empty(_numel(shape), NP[name])
  for start in range(0, out.size, PIECE):   # float64 copies of a piece at a time (crmath decides each element alone)
    out[start:start + PIECE] = fn(*[f[start:start + PIECE].astype(F64) for f in flat], fmt=name)   # exact: the value is the dtype's
  return out.reshape(shape)


PIECE = 1 << 14


def _numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


@unit("EXP2")
def exp2(ctx, x): return transcendental(crmath.exp2, ctx.dtype, x)


@unit("LOG2")
def log2(ctx, x): return transcendental(crmath.log2, ctx.dtype, x)   # log2(±0) = -inf, log2(x<0) = NaN


@unit("SIN")
def sin(ctx, x): return transcendental(crmath.sin, ctx.dtype, x)     # sin(±inf) = NaN


@unit("SQRT")
def sqrt(ctx, x): return float_op(np.sqrt, ctx.dtype, x)         # IEEE: correctly rounded in the dtype


@unit("POW")
def pow_(ctx, a, b): return transcendental(crmath.pow, ctx.dtype, a, b)   # decision pow-domain: C99 Annex F, correctly rounded


def _product(name, a, b): return arith(np.multiply, name, a, b)


@unit("MULACC", accumulates=(2, "ADD", _product))   # acc = a*b + acc: a sum of products
def mulacc(ctx, a, b, c):   # decision mulacc-rounding: a*b rounded, then + c rounded
  name, variants = ctx.dtype, ctx.s.m.variants
  if is_float(name) and "fused" in variants: return fused_mulacc(name, a, b, c)
  if is_float(name) and "wide" in variants and name != "float64":   # in float64 (exact product), rounded there, then to the dtype
    return from_f64(a.astype(F64) * b.astype(F64) + c.astype(F64), name)
  return arith(np.add, name, arith(np.multiply, name, a, b), c)


def fused_mulacc(name, a, b, c):
  """The `fused` variant of decision mulacc-rounding: a*b + c exactly, rounded once to the
  dtype. The exact sum is a double-double (crmath's error-free product and sum), rounded
  to float64 by round-to-odd, which the one rounding to a narrower dtype then keeps exact."""
  a, b, c = np.broadcast_arrays(*(np.asarray(x).astype(F64) for x in (a, b, c)))
  with np.errstate(all="ignore"):
    ph, pl = two_prod(a, b)
    sh, sl = two_sum(ph, c)
    r, e = two_sum(sh, sl + pl)
    if name != "float64":   # round to odd: an inexact r takes the neighbour with an odd last bit
      even = (r.view(np.int64) & 1) == 0
      r = np.where((e != 0) & even & np.isfinite(r), np.nextafter(r, r + e), r)
    plain = a * b + c   # infinities and NaN: what the sum of the exact product gives
  return from_f64(np.where(np.isfinite(r), r, plain), name)
