"""CAST and BITCAST: conversions (decisions cast-float-int, cast-int-int, cast-to-float,
bitcast-nan, bitcast-size)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NP, CLS, F32, F64, NARROW, SATURATING, from_f64, int_to_float, to_saturating
from tinyspec.refimpl.ops.elementwise import truth
from tinyspec.dtypes import DTYPES


def float_to_int(x: np.ndarray, dst: str) -> np.ndarray:
  """Truncate toward zero, then wrap modulo 2^bits; NaN and ±inf give 0 (decision
  cast-float-int, ECMAScript's ToInt32). Exact: in float64, which holds every source
  float; a truncated value at or past 2^64 is a multiple of 2^11 there, whose low 64 bits
  come from its mantissa and exponent."""
  t = np.trunc(x.astype(F64))
  bad = ~np.isfinite(t)
  t = np.where(bad, 0.0, t)
  big = np.abs(t) >= 2.0 ** 63
  low = np.where(big, 0.0, t).astype(np.int64).view(np.uint64)      # |t| < 2^63: exact two's complement
  if np.any(big):
    m, e = np.frexp(np.where(big, np.abs(t), 1.0))                   # |t| = m * 2^e, m in [0.5, 1): 53-bit mantissa
    mant = (m * 2.0 ** 53).astype(np.uint64)
    sh = (e - 53).astype(np.int64)                                   # >= 10 where big
    mod = np.where(sh < 64, mant << np.minimum(sh, 63).astype(np.uint64), np.uint64(0))
    mod = np.where(t < 0, np.uint64(0) - mod, mod)
    low = np.where(big, mod, low)
  bits = 8 * DTYPES[dst].itemsize
  if bits < 64: low = low & np.uint64((1 << bits) - 1)
  return low.astype(f"uint{bits}").view(NP[dst]) if dst != "index" else low.view(np.int64)


def convert(x: np.ndarray, src: str, dst: str) -> np.ndarray:
  """x (dtype src) converted to dtype dst."""
  s, d = CLS[src], CLS[dst]
  if src == dst: return x
  if d == "bool": return truth(x)
  if s == "bool": x, src, s = x.astype(np.uint8), "uint8", "uint"
  if d == "float":
    if s == "float":
      if src in NARROW: x = x.astype(F32)                      # exact
      if dst in SATURATING: return to_saturating(x, dst)       # decision fp8-convert: one rounding, saturating
      if dst == "bfloat16" and x.dtype == F64: return from_f64(x, dst)
      with np.errstate(over="ignore"): return x.astype(NP[dst])   # one rounding (float32 -> narrow, float64 -> float32/16)
    return int_to_float(x, src, dst)
  if s == "float": return float_to_int(x, dst)
  return x.astype(NP[dst])                                      # integer -> integer keeps the low bits


@unit("CAST")
def cast(ctx, x): return convert(x, ctx.src_dtype(0), ctx.dtype)


@unit("BITCAST")
def bitcast(ctx, x):
  """Every bit preserved (NaN payloads too); a byte read as bool is true when nonzero. To
  another itemsize the last axis is rescaled, its bytes read little-endian on every host
  (decision bitcast-size): integer arithmetic on the bit patterns, not a memory view."""
  src, dst = ctx.src_dtype(0), ctx.dtype
  a, b = DTYPES[src].itemsize, DTYPES[dst].itemsize
  if a == b:
    if dst == "bool": return x.view(np.uint8) != 0
    return x.view(NP[dst])
  u = x.view(f"uint{8 * a}")
  if a > b:   # each element splits into a // b pieces, the lowest bits first
    parts = [(u >> np.asarray(8 * b * k, u.dtype)).astype(f"uint{8 * b}") for k in range(a // b)]
    w = np.stack(parts, axis=-1).reshape(u.shape[:-1] + (u.shape[-1] * (a // b),))
  else:       # b // a consecutive elements join, the first one lowest
    r = b // a
    g = u.reshape(u.shape[:-1] + (u.shape[-1] // r, r)).astype(f"uint{8 * b}")
    w = np.zeros(g.shape[:-1], g.dtype)
    for k in range(r): w = w | (g[..., k] << np.asarray(8 * a * k, g.dtype))
  if dst == "bool": return w != 0
  return w.view(NP[dst])
