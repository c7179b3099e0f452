"""Sound interval arithmetic for min_max (see `soundness` in spec/derived.yaml).

Integers: exact Python ints; a bound that leaves the dtype range means the operation
can wrap, so the interval widens to the whole range.
Floats: bounds are computed in float64 and then rounded *outward* onto the dtype's grid
(one step further than round-to-nearest), so the value the dtype's own rounding produces
can never fall outside. NaN is outside every float interval by definition.
"""
from __future__ import annotations
import math
import struct
import numpy as np
from tinyspec.dtypes import dtype as _dt, DTYPES

try:
  import ml_dtypes
except ImportError:  # bfloat16 values need it; bfloat16 intervals do not (bit arithmetic below)
  ml_dtypes = None  # type: ignore[assignment]  # an optional dependency: None where it is missing


def _numpy_type(np_name: str):
  """NumPy's dtype of that name; bfloat16 through ml_dtypes (None without it)."""
  try: return np.dtype(np_name)
  except TypeError: pass
  t = getattr(ml_dtypes, np_name, None) if ml_dtypes is not None else None
  return np.dtype(t) if t is not None else None


# every dtype NumPy (with ml_dtypes, when installed) can hold, by spec/dtypes.yaml `np`
NUMPY_TYPES: dict[str, np.dtype] = {n: t for n, d in DTYPES.items() if d.np and (t := _numpy_type(d.np)) is not None}
# the float dtypes NumPy holds only through ml_dtypes (user-defined NumPy types, not builtin
# ones; their kind is "V", or "f" for float8_e5m2): bfloat16, the float8s
EXTENDED_FLOATS: dict[str, np.dtype] = {n: t for n, t in NUMPY_TYPES.items() if DTYPES[n].cls == "float" and t.isbuiltin != 1}


def is_float_type(t) -> bool:
  """Does NumPy dtype t hold a float dtype's values (float16/32/64, or one of EXTENDED_FLOATS)?"""
  t = np.dtype(t)
  return t.kind == "f" or t in EXTENDED_FLOATS.values()


def np_dtype(name: str):
  """The NumPy dtype that holds values of dtype `name`."""
  t = NUMPY_TYPES.get(name)
  if t is None:
    d = _dt(name)
    if d.np is None: raise TypeError(f"{d.name} has no values")
    raise TypeError(f"{d.name} values need the ml_dtypes package (pip install ml_dtypes)")
  return t


def dtype_range(name):
  r = _RANGES.get(name) if isinstance(name, str) else None
  return None if r is None or r[0] is None else r


_FLOATS = frozenset(n for n, d in DTYPES.items() if d.cls == "float")
_RANGES = {n: (d.min, d.max) for n, d in DTYPES.items()}


def _is_float(name) -> bool: return name in _FLOATS


# float16 / float32 / float64 as struct formats with the unsigned integer of the same width:
# rounding to nearest is struct.pack (OverflowError past the largest finite), and one step
# along the grid is +-1 on the bit pattern (sign-magnitude order).
_PACK = {"float16": ("<e", "<H"), "float32": ("<f", "<I"), "float64": ("<d", "<Q")}


def _round_to_odd_f32(x):
  """float64 -> float32 by round-to-odd (truncate, set the last bit when inexact), so that
  rounding the result to a narrower format (bfloat16) rounds once, like the reference
  evaluator does. ml_dtypes' float64 -> bfloat16 goes through float32 rounding to nearest
  twice: 1 + 2^-8 + 2^-40 would become 1 instead of 1 + 2^-7 (an unsound interval)."""
  f = x.astype(np.float32)
  back = f.astype(np.float64)
  inexact = (back != x) & (x == x)
  f = np.where(inexact & (np.abs(back) > np.abs(x)), np.nextafter(f, np.float32(0)), f)
  return np.where(inexact, f.view(np.uint32) | np.uint32(1), f.view(np.uint32)).astype(np.uint32).view(np.float32)


# bfloat16 is the top half of a float32: its grid is float32's with 16 bits less mantissa,
# so rounding and stepping are bit arithmetic on float32 patterns (no ml_dtypes needed)
def _bf16_bits(x: float) -> int:
  """The bfloat16 pattern nearest to float64 x (ties to even; one rounding: round-to-odd to float32 first)."""
  with np.errstate(over="ignore", invalid="ignore"):
    b = int(_round_to_odd_f32(np.array(x, dtype=np.float64)).view(np.uint32))
  return (b + 0x7fff + ((b >> 16) & 1)) >> 16


def _bf16_value(bits: int) -> float: return struct.unpack("<f", struct.pack("<I", bits << 16))[0]


def _saturating_grid(name: str) -> tuple:
  """(every finite value of a saturating float8 dtype, ascending; their bit patterns): 256
  patterns, so rounding and stepping are searches of the whole grid."""
  patterns = np.arange(256, dtype=np.uint8)
  values = patterns.view(NUMPY_TYPES[name]).astype(np.float64)
  keep = np.isfinite(values) & ~((values == 0) & np.signbit(values))   # one zero
  order = np.argsort(values[keep], kind="stable")
  return values[keep][order], patterns[keep][order]


# the saturating dtypes NumPy can hold (ml_dtypes); without it their intervals are the whole range
_SATURATING = {n: _saturating_grid(n) for n, d in DTYPES.items() if d.saturate and n in NUMPY_TYPES}


def _nearest_saturating(x: float, name: str) -> float:
  """x rounded to nearest, ties to the even pattern, saturating at the largest finite (decision fp8-convert)."""
  values, patterns = _SATURATING[name]
  i = int(np.searchsorted(values, x, side="right")) - 1
  if i < 0: return float(values[0])
  if i == len(values) - 1: return float(values[-1])
  lo, hi = float(values[i]), float(values[i + 1])
  if x - lo != hi - x: return lo if x - lo < hi - x else hi
  return lo if int(patterns[i]) % 2 == 0 else hi


def _down_saturating(x: float, name: str) -> float:
  """One value of the dtype below the largest one <= x (absorbing the rounding of computing x
  in float64 first); the smallest finite below that, since a finite result saturates there."""
  values = _SATURATING[name][0]
  return float(values[max(int(np.searchsorted(values, x, side="right")) - 2, 0)])


def _nearest(x: float, name: str) -> float:
  """x rounded to nearest (ties to even) in dtype `name`; ±inf past the largest finite
  (a saturating dtype: its largest finite)."""
  if name in _SATURATING: return _nearest_saturating(x, name)
  fmt = _PACK.get(name)
  if fmt is None: return _bf16_value(_bf16_bits(x))
  try: return struct.unpack(fmt[0], struct.pack(fmt[0], x))[0]
  except OverflowError: return math.copysign(math.inf, x)


def _step_down(y: float, name: str) -> float:
  """The next value of dtype `name` below y (y on the dtype's grid)."""
  if name in _PACK: return _down_bits(y, name)
  if y == -math.inf: return y
  b = _bf16_bits(y)
  if not b & 0x7fff: return _bf16_value(0x8001)                     # ±0: the smallest negative subnormal
  return _bf16_value(b + 1 if b & 0x8000 else b - 1)


def _grid(f: str, u: str) -> tuple:
  """(float format, unsigned format, sign bit, the smallest negative subnormal, the largest finite)."""
  sign = 1 << (struct.calcsize(u) * 8 - 1)
  inf_bits = struct.unpack(u, struct.pack(f, math.inf))[0]
  return (f, u, sign, -struct.unpack(f, struct.pack(u, 1))[0], struct.unpack(f, struct.pack(u, inf_bits - 1))[0])


_GRID = {n: _grid(f, u) for n, (f, u) in _PACK.items()}


def _down_bits(x: float, name: str) -> float:
  """One step below the value of dtype `name` nearest to x: round by packing, then step
  on the bit pattern (two struct round trips)."""
  if x == -math.inf: return x
  f, u, sign, smallest_neg, max_finite = _GRID[name]
  try: bits = struct.unpack(u, struct.pack(f, x))[0]
  except OverflowError: return max_finite if x > 0 else -math.inf   # the nearest is ±inf
  if not bits & (sign - 1): return smallest_neg                      # ±0
  return struct.unpack(f, struct.pack(u, bits + 1 if bits & sign else bits - 1))[0]


def _down(x: float, name: str) -> float:
  """Largest value of dtype `name` that is <= x (and one step lower, to absorb the
  double rounding of computing x in float64 first)."""
  if x != x: return -math.inf
  if name in _PACK: return _down_bits(x, name)
  if x == -math.inf: return x
  if _dt(name).saturate: return _down_saturating(x, name) if name in _SATURATING else -math.inf
  return _step_down(_nearest(x, name), name)


def _up(x: float, name: str) -> float:
  return -_down(-x, name)


def _float_iv(lo: float, hi: float, name: str):
  if lo != lo or hi != hi: return dtype_range(name)
  if lo == -math.inf and hi == math.inf: return (lo, hi)   # the common case once ranges have grown
  return (_down(lo, name), -_down(-hi, name))


def _int_iv(lo: int, hi: int, name: str | None):
  if name is None: return (lo, hi)   # no dtype: the mathematical interval (does the op wrap in one?)
  r = _RANGES[name]
  return (lo, hi) if r[0] <= lo and hi <= r[1] else r


def iv_zero(name): return (0, 0) if not _is_float(name) else (0.0, 0.0)


def iv_hull(*ivs):
  ivs = [i for i in ivs if i is not None]
  if not ivs: return None
  return (min(i[0] for i in ivs), max(i[1] for i in ivs))


def round_to(f: float, name: str) -> float:
  """f rounded to nearest in dtype `name` (overflow gives ±inf)."""
  if name == "float64" or math.isinf(f) or math.isnan(f): return f
  return _nearest(f, name)


def iv_const(v, name):
  d = _dt(name)
  if d.cls == "bool": return (int(bool(v)), int(bool(v)))
  if d.cls == "float":
    if v == "nan" or isinstance(v, float) and math.isnan(v): return dtype_range(name)
    if d.saturate and name not in _SATURATING: return dtype_range(name)   # no grid without ml_dtypes
    r = round_to(float(v), name)
    return (r, r)
  return (int(v), int(v))


def iv_consts(vs, name):
  if not vs: return dtype_range(name)
  return iv_hull(*[iv_const(v, name) for v in vs])


def iv_add(a, b, name):
  if a is None or b is None: return dtype_range(name)
  if _is_float(name): return _float_iv(a[0] + b[0], a[1] + b[1], name)
  return _int_iv(a[0] + b[0], a[1] + b[1], name)


def iv_sub(a, b, name):
  if a is None or b is None: return dtype_range(name)
  if _is_float(name): return _float_iv(a[0] - b[1], a[1] - b[0], name)
  return _int_iv(a[0] - b[1], a[1] - b[0], name)


def iv_mul(a, b, name):
  if a is None or b is None: return dtype_range(name)
  if _is_float(name):
    c = [x * y for x in a for y in b]   # Python floats: inf*0 is nan, overflow is inf, no traps
    if any(v != v for v in c): return dtype_range(name)
    return _float_iv(min(c), max(c), name)
  c = [x * y for x in a for y in b]
  return _int_iv(min(c), max(c), name)


def iv_max(a, b, name=None):
  """MAX is b if a < b else a (decision max-nan): for integers [max(a, b), max(A, B)]; a
  float MAX with a NaN operand gives the other one, so only the hull of both is sound."""
  if a is None or b is None: return None
  if _is_float(name): return iv_hull(a, b)
  return (max(a[0], b[0]), max(a[1], b[1]))


def iv_shl(a, b, name):
  """a << b for a >= 0 and an amount inside [0, width): [a << b, A << B] when that fits
  the dtype, else the dtype range (it can wrap; decision shift)."""
  if a is None or b is None: return dtype_range(name)
  w = 8 * _dt(name).itemsize
  if a[0] < 0 or b[0] < 0 or b[1] >= w: return dtype_range(name)
  return _int_iv(int(a[0]) << int(b[0]), int(a[1]) << int(b[1]), name)


def iv_shr(a, b, name):
  """a >> b for a >= 0 and an amount >= 0 (floor division by 2^b): [a >> B, A >> b]."""
  if a is None or b is None or a[0] < 0 or b[0] < 0: return dtype_range(name)
  w = 8 * _dt(name).itemsize
  return (int(a[0]) >> min(int(b[1]), w), int(a[1]) >> min(int(b[0]), w))


def iv_idiv(a, b, name):
  if a is None or b is None or b[0] < 1: return dtype_range(name)
  c = [x // y for x in a for y in b]
  return _int_iv(min(c), max(c), name)


def iv_mod(a, b, name):
  if a is None or b is None or b[0] < 1: return dtype_range(name)
  if a[0] >= 0 and a[1] < b[0]: return a
  return (0, b[1] - 1)


def iv_cmplt(a, b, src_dtype):
  if a is None or b is None: return (0, 1)
  if a[0] >= b[1]: return (0, 0)
  if not _is_float(src_dtype) and a[1] < b[0]: return (1, 1)
  return (0, 1)


def iv_cmpne(a, b, src_dtype):
  if a is None or b is None: return (0, 1)
  if a[1] < b[0] or b[1] < a[0]: return (1, 1)
  if not _is_float(src_dtype) and a[0] == a[1] == b[0] == b[1]: return (0, 0)
  return (0, 1)


def iv_where(p, b, c, p_dtype):
  if p is not None and not (p[0] <= 0 <= p[1]): return b      # never zero (NaN is nonzero too)
  if p is not None and p == (0, 0) and not _is_float(p_dtype): return c
  return iv_hull(b, c)


def iv_cast(a, src, dst):
  if a is None or not isinstance(src, str): return dtype_range(dst)
  s, d = _dt(src), _dt(dst)
  if d.cls == "bool":
    if not (a[0] <= 0 <= a[1]): return (1, 1)
    if a == (0, 0) and s.cls != "float": return (0, 0)
    return (0, 1)
  if d.cls == "float":
    return _float_iv(float(a[0]), float(a[1]), dst)
  if s.cls == "float":   # truncating, wrapping (decision cast-float-int); NaN and ±inf become 0
    if not (math.isfinite(a[0]) and math.isfinite(a[1])): return dtype_range(dst)
    lo, hi = math.trunc(a[0]), math.trunc(a[1])
    if lo < d.min or hi > d.max: return dtype_range(dst)   # it can wrap
    return iv_hull((lo, hi), (0, 0))
  return _int_iv(int(a[0]), int(a[1]), dst)
