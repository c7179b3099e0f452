"""Values of each dtype (spec/dtypes.yaml): the edge values every case and strategy uses,
and conversion of Python numbers into a dtype the way CONST does."""
from __future__ import annotations
import math
from functools import lru_cache
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.intervals import NUMPY_TYPES as NP


def np_type(dt: str) -> np.dtype:
  return NP[dt]


def float_limits(dt: str) -> tuple[float, float, float]:
  """(largest finite, smallest normal, smallest subnormal) of float dtype dt."""
  d = DTYPES[dt]
  m, e = d.mantissa, d.exponent
  big = float((2 - 2.0 ** -m) * 2.0 ** (2 ** (e - 1) - 1))
  tiny = 2.0 ** (2 - 2 ** (e - 1))
  sub = 2.0 ** (2 - 2 ** (e - 1) - m)
  return big, tiny, sub


@lru_cache(maxsize=None)
def edge_values(dt: str) -> tuple:
  """The values a case of dtype dt covers, as Python numbers: zero (both signs), one,
  small integers and halves, NaN, ±inf, the largest finite, the smallest normal and
  subnormal for floats; 0, ±1, small values, min and max, and the shift widths around
  the bit width for integers."""
  d = DTYPES[dt]
  if d.cls == "bool": return (False, True)
  if d.cls == "float":
    big, tiny, sub = float_limits(dt)
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -1.5, 2.5, 3.0, -7.0, 100.0, 1000.0, 3.140625, -0.3125,
            math.nan, math.inf, -math.inf, big, -big, tiny, -tiny, sub, -sub, tiny - sub]
    return tuple(vals)
  lo, hi, w = int(d.min), int(d.max), d.bits
  cand = [0, 1, -1, 2, -2, 3, -7, 7, 100, -100, lo, lo + 1, hi, hi - 1, w - 1, w, w + 1, -w, hi // 2, hi // 2 + 1]
  out = []
  for v in cand:
    if lo <= v <= hi and v not in out: out.append(v)
  return tuple(out)


@lru_cache(maxsize=None)
def special_values(dt: str) -> tuple:
  """The edge values most bugs show at, drawn more often than the rest: NaN, the
  infinities and signed zeros, the largest finite values (floats); 0, -1, the minimum
  and maximum (integers)."""
  d = DTYPES[dt]
  if d.cls == "bool": return (False, True)
  if d.cls == "float":
    big = float_limits(dt)[0]
    return (math.nan, math.inf, -math.inf, 0.0, -0.0, big, -big, math.nan)
  return tuple(dict.fromkeys(v for v in (0, -1, int(d.min), int(d.max), 1) if d.min <= v <= d.max))


def edge_dense(dt: str, n: int, rng) -> np.ndarray:
  """n values of dt from a NumPy Generator: half edge values (special ones twice as often),
  half random ones (floats: small, then any magnitude; integers: small, then any)."""
  d = DTYPES[dt]
  if d.cls == "bool": return rng.integers(0, 2, n).astype(bool)
  pool = list(edge_values(dt)) + 2 * list(special_values(dt))
  out = as_array([pool[k] for k in rng.integers(0, len(pool), n)], dt)
  if d.cls == "float":
    big = float_limits(dt)[0]
    mag = np.where(rng.random(n) < 0.5, rng.normal(0, 8, n), rng.choice([-1.0, 1.0], n) * np.exp2(rng.uniform(-20, np.log2(big), n)))
    rnd = as_array(mag, dt)
  else:
    lo, hi = int(d.min), int(d.max)
    small = rng.integers(max(lo, -20), min(hi, 20) + 1, n)
    wide = [int(x) for x in rng.integers(0, 2**63, n, dtype=np.uint64)]
    rnd = as_array([s if k else lo + w % (hi - lo + 1) for s, k, w in zip(small.tolist(), rng.random(n) < 0.5, wide)], dt)
  return np.where(rng.random(n) < 0.5, out, rnd)


def as_array(values, dt: str) -> np.ndarray:
  """Python numbers as an array of dt (floats rounded once from float64)."""
  t = np_type(dt)
  if DTYPES[dt].cls == "float":
    with np.errstate(over="ignore"):
      return np.array([float(v) for v in values], dtype=np.float64).astype(t)
  if DTYPES[dt].cls == "bool": return np.array([bool(v) for v in values], dtype=bool)
  return np.array([int(v) for v in values], dtype=t)


def convert(v, dt: str):
  """A Python number as a value of dt: floats rounded, integers wrapped, bools nonzero."""
  d = DTYPES[dt]
  if isinstance(v, str): v = float(v)
  if d.cls == "bool": return bool(v) if not (isinstance(v, float) and math.isnan(v)) else True
  if d.cls == "float": return float(np.array([float(v)], np.float64).astype(np_type(dt))[0])
  if isinstance(v, float):
    if not math.isfinite(v): v = 0
    v = int(v)
  span = 1 << d.bits
  v = int(v) % span
  return v - span if d.min < 0 and v > d.max else v


def const_json(v, dt: str):
  """A value as a CONST/VCONST arg writes it (float specials as strings)."""
  if DTYPES[dt].cls == "float":
    f = float(v)
    if math.isnan(f): return "nan"
    if math.isinf(f): return "inf" if f > 0 else "-inf"
    return f
  if DTYPES[dt].cls == "bool": return bool(v)
  return int(v)


def cycle(values, dt: str, n: int) -> np.ndarray:
  """n values of dt, the edge values repeated in order."""
  base = as_array(values, dt)
  if n == 0 or base.size == 0: return np.zeros(n, np_type(dt))
  return np.resize(base, n)
