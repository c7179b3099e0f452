"""Elementwise ops (category `elementwise`): the primitives, exactly as the decisions in
spec/ops.yaml say. Sources arrive broadcast-compatible and of one dtype (validated)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import float_op, int_op, is_float, is_signed_int, unsigned, bits, NP, VIA_F32, EXTENDED_FLOATS


def arith(fn, name, *xs):
  """fn in dtype `name`: floats rounded once, integers wrapping (decisions float-arith, int-wrap)."""
  return float_op(fn, name, *xs) if is_float(name) else int_op(fn, name, *xs)


@unit("ADD", accumulates=(None, "ADD", None))   # acc = acc + x: a carried loop that is a sum (refimpl/loops.py)
def add(ctx, a, b): return arith(np.add, ctx.dtype, a, b)


@unit("MUL", accumulates=(None, "MUL", None))
def mul(ctx, a, b): return arith(np.multiply, ctx.dtype, a, b)


def max_select(a, b):
  """b where a < b, else a (decision max-nan): a NaN operand selects the first, and of two
  equal zeros the first; the selected operand's bits pass through."""
  return np.where(a < b, b, a)


@unit("MAX", accumulates=(None, "MAX", None))
def max_(ctx, a, b):   # decision max-nan; for bool it is OR
  if ctx.dtype == "bool": return np.maximum(a, b)
  if ctx.dtype in VIA_F32: return np.where(a.astype(np.float32) < b.astype(np.float32), b, a)
  return max_select(a, b)


def _divisor_masks(name, b):
  zero = b == 0
  minus1 = (b == -1) if is_signed_int(name) else np.zeros(np.shape(b), bool)
  return zero, minus1, np.where(zero | minus1, np.ones((), b.dtype), b)


@unit("IDIV")
def idiv(ctx, a, b):
  """Floor division; a/0 = 0; MIN/-1 wraps to MIN (decision idiv-mod)."""
  name = ctx.dtype
  zero, minus1, safe = _divisor_masks(name, b)
  q = np.floor_divide(a, safe)
  if np.any(minus1): q = np.where(minus1, int_op(np.negative, name, np.broadcast_to(a, np.shape(q))), q)
  return np.where(zero, np.zeros((), q.dtype), q)


@unit("MOD")
def mod(ctx, a, b):
  """Sign of the divisor; a mod 0 = a; MIN mod -1 = 0 (a mod 1 is 0 too)."""
  zero, _, safe = _divisor_masks(ctx.dtype, b)
  r = np.remainder(a, safe)
  return np.where(zero, a, r)


def _cmp(fn, ctx, a, b):
  name = ctx.src_dtype(0)
  if name in VIA_F32: a, b = a.astype(np.float32), b.astype(np.float32)
  return fn(a, b)


@unit("CMPLT")
def cmplt(ctx, a, b): return _cmp(np.less, ctx, a, b)        # decision cmp-nan: IEEE


@unit("CMPNE")
def cmpne(ctx, a, b): return _cmp(np.not_equal, ctx, a, b)   # NaN != anything


@unit("XOR")
def xor(ctx, a, b): return np.bitwise_xor(a, b)


@unit("OR")
def or_(ctx, a, b): return np.bitwise_or(a, b)


@unit("AND")
def and_(ctx, a, b): return np.bitwise_and(a, b)


def _shift_amount(name, b):
  """(in range mask, amount as the unsigned type) for decision shift."""
  ok = (b >= 0) & (b < bits(name)) if is_signed_int(name) else (b < bits(name))
  return ok, np.where(ok, b, np.zeros((), b.dtype)).astype(unsigned(name))


@unit("SHL")
def shl(ctx, a, b):
  name = ctx.dtype
  ok, amt = _shift_amount(name, b)
  r = np.left_shift(a.view(unsigned(name)), amt).view(NP[name])
  return np.where(ok, r, np.zeros((), r.dtype))


@unit("SHR")
def shr(ctx, a, b):
  name = ctx.dtype
  ok, amt = _shift_amount(name, b)
  if is_signed_int(name):
    r = np.right_shift(a, amt.astype(a.dtype))          # arithmetic on signed types
    out_of_range = np.where(a < 0, np.array(-1, a.dtype), np.zeros((), a.dtype))
  else:
    r = np.right_shift(a, amt)
    out_of_range = np.zeros((), a.dtype)
  return np.where(ok, r, out_of_range)


def truth(x: np.ndarray) -> np.ndarray:
  """x != 0 for any scalar dtype (NaN is nonzero; -0.0 is zero)."""
  return x if x.dtype == np.bool_ else (x.astype(np.float32) if x.dtype in EXTENDED_FLOATS.values() else x) != 0


@unit("WHERE")
def where(ctx, p, a, b): return np.where(truth(p), a, b)   # decision where-cond: p is a bool


@unit("RECIP")
def recip(ctx, x): return float_op(np.reciprocal, ctx.dtype, x)   # decision float-div-zero


@unit("TRUNC")
def trunc(ctx, x): return float_op(np.trunc, ctx.dtype, x)


