"""CAST and BITCAST: conversions (decisions cast-float-int, cast-int-int, cast-to-float,
bitcast-nan)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NP, CLS, F32, F64, NARROW, from_f64, int_to_float
from tinyspec.refimpl.ops.elementwise import truth
from tinyspec.dtypes import DTYPES


def float_to_int(x: np.ndarray, dst: str) -> np.ndarray:
  """Truncate toward zero, saturate at the dtype's range, NaN -> 0 (in float64, which
  holds every source float and every threshold exactly: the limits are 0 or ±2^k)."""
  t = np.trunc(x.astype(F64))
  lo, hi = DTYPES[dst].min, DTYPES[dst].max
  below, above = t < float(lo), t >= float(hi + 1)
  bad = below | above | np.isnan(t)
  out = np.where(bad, 0.0, t).astype(NP[dst])
  if np.any(below): out = np.where(below, np.array(lo, NP[dst]), out)
  if np.any(above): out = np.where(above, np.array(hi, NP[dst]), out)
  return out


def convert(x: np.ndarray, src: str, dst: str) -> np.ndarray:
  """x (dtype src) converted to dtype dst."""
  s, d = CLS[src], CLS[dst]
  if src == dst: return x
  if d == "bool": return truth(x)
  if s == "bool": x, src, s = x.astype(np.uint8), "uint8", "uint"
  if d == "float":
    if s == "float":
      if src in NARROW: x = x.astype(F32)                      # exact
      if dst == "bfloat16" and x.dtype == F64: return from_f64(x, dst)
      with np.errstate(over="ignore"): return x.astype(NP[dst])   # one rounding (float32 -> narrow, float64 -> float32/16)
    return int_to_float(x, src, dst)
  if s == "float": return float_to_int(x, dst)
  return x.astype(NP[dst])                                      # integer -> integer keeps the low bits


@unit("CAST")
def cast(ctx, x): return convert(x, ctx.src_dtype(0), ctx.dtype)


@unit("BITCAST")
def bitcast(ctx, x):
  """Every bit preserved (NaN payloads too); a byte read as bool is true when nonzero."""
  if ctx.dtype == "bool": return x.view(np.uint8) != 0
  return x.view(NP[ctx.dtype])
