"""NumPy storage types and exact rounding, read from spec/dtypes.yaml.

Every dtype is stored in the NumPy type the table names (`np`), bfloat16 through
ml_dtypes (tinyspec.intervals.NUMPY_TYPES: without ml_dtypes, bfloat16 values are refused
by name). Arithmetic happens in the dtype's own width:
  * integers wrap (decision int-wrap): sums and products are computed on the unsigned
    view of the same width, where NumPy's modular arithmetic is defined and warning-free;
  * float32 and float64 compute in themselves, never silently widened;
  * float16 and bfloat16 compute in float32 and round once (decision float-arith: exact
    for + - * / sqrt, since float32 has more than 2p+2 bits of either);
  * conversions that NumPy or ml_dtypes round twice (float64 -> bfloat16, wide integers
    -> bfloat16) go through round-to-odd, which makes the second rounding exact;
  * the float8s (tinygrad's fp8s, `overflow: saturate` in the table) compute in float32
    like float16, and every conversion to them is to_saturating: rounded once from float64
    to nearest even, saturating (decision fp8-convert), not ml_dtypes' own cast.
"""
from __future__ import annotations
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.intervals import NUMPY_TYPES as NP, EXTENDED_FLOATS, np_dtype

CLS: dict[str, str] = {n: d.cls for n, d in DTYPES.items()}
NARROW = frozenset(n for n, d in DTYPES.items() if d.cls == "float" and d.itemsize < 4)   # computed in float32
NATIVE_FLOATS = frozenset(n for n, d in DTYPES.items() if d.cls == "float" and n not in NARROW)   # computed in their own NumPy type
SATURATING = frozenset(n for n, d in DTYPES.items() if d.saturate)   # converted by to_saturating
VIA_F32 = frozenset(EXTENDED_FLOATS)   # bfloat16, the float8s: NumPy holds them through ml_dtypes; compared and maxed in float32
F32 = np.dtype(np.float32)
F64 = np.dtype(np.float64)


def is_float(name: str) -> bool: return CLS[name] == "float"
def is_int(name: str) -> bool: return DTYPES[name].is_int
def is_signed_int(name: str) -> bool: return CLS[name] in ("int", "index")


def unsigned(name: str) -> np.dtype:
  """The unsigned NumPy type of the same width (for wrap-around arithmetic and shifts)."""
  return np.dtype(f"uint{DTYPES[name].itemsize * 8}")


def bits(name: str) -> int: return DTYPES[name].itemsize * 8


def arr(x, name: str) -> np.ndarray:
  """x as an ndarray of dtype `name` (0-d for scalars)."""
  return np.asarray(x, dtype=NP[name])


def zeros(shape, name: str) -> np.ndarray: return np.zeros(shape, dtype=NP[name])


# ------------------------------------------------------------------ float computation
def up(x: np.ndarray, name: str) -> np.ndarray:
  return x.astype(F32) if name in NARROW else x


def down(x: np.ndarray, name: str) -> np.ndarray:
  """A float32 (or same-type) result rounded once to `name` (NumPy and ml_dtypes round
  float32 to float16/bfloat16 to nearest even)."""
  t = NP[name]
  if x.dtype == t: return x
  return to_saturating(x, name) if name in SATURATING else x.astype(t)


def to_saturating(x: np.ndarray, name: str) -> np.ndarray:
  """Float values (any float dtype, read exactly in float64) converted to a saturating
  float dtype (decision fp8-convert, tinygrad's float_to_fp8): rounded to nearest even on
  the dtype's grid (quantum 2^(e - mantissa) at exponent e, the subnormal quantum below
  the normal range), a finite result past finite_max becomes ±finite_max; NaN becomes
  the dtype's NaN with x's sign (one unsigned NaN where the dtype has no -0.0), ±inf
  becomes ±inf or, where the dtype has none, that NaN; a zero is +0.0 where -0.0 is missing."""
  D, t = DTYPES[name], NP[name]
  x = np.asarray(x)
  x = x.astype(np.float32).astype(F64) if x.dtype == NP.get("bfloat16") else x.astype(F64)
  with np.errstate(all="ignore"):
    finite = np.isfinite(x)
    mag = np.where(finite, np.abs(x), 0.0)
    exp = np.frexp(mag)[1] - 1                                           # floor(log2 |x|) for |x| > 0
    quantum = np.ldexp(1.0, np.maximum(exp, 1 - D.exponent_bias) - D.mantissa)
    r = np.minimum(np.rint(mag / quantum) * quantum, D.normal_range[1])   # rint: half to even
  u = np.where(np.signbit(x), -r, r).astype(t).view(np.uint8)            # exact: r is on the grid
  sign = np.where(np.signbit(x), np.uint8(0x80), np.uint8(0))
  nan = np.uint8(D.nan) if not D.negzero else np.uint8(D.nan) | sign
  inf = (np.uint8(((1 << D.exponent) - 1) << D.mantissa) | sign) if D.has_inf else nan
  if not D.negzero: u = np.where(u == 0x80, np.uint8(0), u)   # before NaN: 0x80 is the fnuz NaN
  u = np.where(np.isnan(x), nan, np.where(np.isinf(x), inf, u))
  return u.astype(np.uint8).view(t)


def float_op(fn, name: str, *xs):
  """fn on float operands of dtype `name`, rounded once to `name`."""
  if name in NARROW: return down(np.asarray(fn(*[x.astype(F32) for x in xs])), name)
  return np.asarray(fn(*xs))


def canonical_nan(x: np.ndarray, name: str) -> np.ndarray:
  """x with every NaN replaced by dtype `name`'s canonical NaN (decision nan-canonical:
  a computed NaN's sign and payload would otherwise depend on the CPU and on which
  operand the hardware propagated). Other values keep their bits."""
  nan = DTYPES[name].nan
  if nan is None or x.size == 0: return x
  hit = np.isnan(x)
  if not hit.any(): return x
  canon = np.asarray(nan, unsigned(name)).view(x.dtype)
  return np.where(hit, canon, x)


def int_op(fn, name: str, *xs):
  """fn on integer operands of dtype `name`, computed modulo 2^bits on unsigned views."""
  t, u = NP[name], unsigned(name)
  return np.asarray(fn(*[x.view(u) for x in xs])).astype(u, copy=False).view(t)


def round_to_odd_f32(x: np.ndarray) -> np.ndarray:
  """float64 -> float32 rounding to odd: truncate, then set the last bit if inexact. A
  following round-to-nearest to any format with <= 22 mantissa bits is then exact."""
  with np.errstate(all="ignore"):
    f = x.astype(F32)
    back = f.astype(F64)
    inexact = (back != x) & ~np.isnan(x)
    over = inexact & (np.abs(back) > np.abs(x))
    f = np.where(over, np.nextafter(f, np.zeros_like(f)), f)
    b = f.view(np.uint32)
    b = np.where(inexact, b | np.uint32(1), b)
  return b.astype(np.uint32).view(F32)


def from_f64(x: np.ndarray, name: str) -> np.ndarray:
  """A float64 value rounded once (to nearest even) to float dtype `name`."""
  t = NP[name]
  x = np.asarray(x, dtype=F64)
  if t == F64: return x
  if name in SATURATING: return to_saturating(x, name)
  if name == "bfloat16": return round_to_odd_f32(x).astype(np_dtype(name))
  with np.errstate(over="ignore"):
    return x.astype(t)   # float32 and float16: NumPy rounds float64 directly


def int_to_float(x: np.ndarray, src: str, name: str) -> np.ndarray:
  """An integer array converted to float dtype `name`, rounded once to nearest even."""
  t = NP[name]
  if name in SATURATING: return from_f64(x.astype(F64), name)   # exact in float64 up to 2^53; larger ones saturate either way
  if name != "bfloat16":
    return x.astype(t)   # C conversions of integers to float/double/half round once
  if DTYPES[src].itemsize < 8: return from_f64(x.astype(F64), name)   # exact in float64
  # 64-bit values of 2^53 and more: fold the bits below bit 20 into a sticky bit, so float64
  # holds the value exactly (at most 44 significant bits) without changing how it rounds to
  # 8 bits (the rounding position is then bit 46 or higher).
  neg = x < 0 if is_signed_int(src) else np.zeros(x.shape, bool)
  mag = np.where(neg, (np.uint64(0) - x.view(np.uint64)), x.view(np.uint64)).astype(np.uint64)
  sticky = (mag & np.uint64((1 << 20) - 1)) != 0
  jam = ((mag >> np.uint64(20)) | sticky.astype(np.uint64)) << np.uint64(20)
  f = np.where(mag >= np.uint64(1 << 53), jam, mag).astype(F64)
  return from_f64(np.where(neg, -f, f), name)


def broadcast_shape(*shapes) -> tuple:
  """np.broadcast_shapes without its limit of 32 dimensions (a kernel's values carry one axis
  per loop, and tinygrad's kernels can have more loops than that)."""
  n = max((len(s) for s in shapes), default=0)
  out = [1] * n
  for s in shapes:
    for i, d in enumerate(s, n - len(s)):
      if d == 1 or d == out[i]: continue
      if out[i] != 1: raise ValueError(f"shapes {shapes} do not broadcast")
      out[i] = d
  return tuple(out)
