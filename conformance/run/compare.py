"""Judging a backend's values against the reference: exact for integers and bools, within
the tolerance of ops.yaml `tolerances:` for floats.

A tolerance is an array of per-element bounds in units in the last place of the result
dtype (tinyspec.tolerance.ulp_distance: neighbours are 1 apart, +0 and -0 one point):

  0     the bits must be equal (the sign of zero counts), any NaN matches any NaN
  k > 0 ulp_distance(got, want) <= k (NaN matches only NaN); k in (0, 1): equal values,
        either sign of zero
  inf   anything (outside the op's domain, where the table specifies nothing, or a value
        the portable profile leaves free); integers and bools: exact unless inf

An element also passes when it matches one of the *alternatives* (other results the
portable profile allows, tinyspec.portable) within the same bound.

`element_bounds()` computes them from the table: the op's `ulp` (or `decomposed_ulp`
for backends that compute it through its decomposition) inside its `domain`, 0 wherever
an operand is NaN or ±inf (special values are exact), inf elsewhere outside the domain.
Reductions (`ulp_per_element`) are scaled by their size: a MUL reduction of n elements may
be n * k ulps off; an ADD reduction may be off by k * n ulps of the largest partial sum,
that is k * n * spacing(sum |x|) in absolute terms, converted here into ulps of the
expected result (any order of summation, float16/bfloat16 accumulated in float32, stays
within it); MAX is exact. Where sum |x| overflows the dtype the result is free except
for NaN inputs.
"""
from __future__ import annotations
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.tolerance import ulp_distance, tolerance, in_domain, bits, show_value, apart   # (bits, show_value, apart: what a message shows of a float)
from tinyspec.tables import tables
from tinyspec.intervals import is_float_type


def _is_float(dt: str) -> bool: return DTYPES[dt].cls == "float"


def mismatches(got, want, dt: str, bounds=0.0, alternatives=()) -> np.ndarray:
  """Boolean mask of the elements where got is acceptable against neither want nor any of
  the alternatives (arrays of want's shape: other allowed results, tinyspec.portable),
  each within the element's bound."""
  got, want = np.asarray(got), np.asarray(want)
  b = np.broadcast_to(np.asarray(bounds, dtype=np.float64), want.shape)
  bad = _bad(got, want, dt, b)
  for alt in alternatives:
    if not bad.any(): break
    bad = bad & _bad(got, np.asarray(alt).astype(want.dtype, copy=False), dt, b)
  return bad


def _bad(got, want, dt: str, b) -> np.ndarray:
  free = np.isinf(b)
  if not _is_float(dt):
    if got.dtype == np.bool_ or want.dtype == np.bool_: return (got.astype(bool) != want.astype(bool)) & ~free
    return (got.astype(want.dtype) != want) & ~free
  got = got.astype(want.dtype, copy=False)
  gn, wn = np.isnan(got.astype(np.float64)), np.isnan(want.astype(np.float64))
  exact_bad = (bits(got) != bits(want)) & ~(gn & wn)
  dist = ulp_distance(got, want)
  return np.where(b == 0, exact_bad, ~free & (dist > b))


def describe(got, want, dt: str, bounds=0.0, limit: int = 3, alternatives=()) -> str | None:
  """None when got is acceptable, else a message naming the first elements that differ."""
  got, want = np.asarray(got), np.asarray(want)
  if got.shape != want.shape: return f"shape {got.shape}, expected {want.shape}"
  bad = mismatches(got, want, dt, bounds, alternatives)
  if not bad.any(): return None
  b = np.broadcast_to(np.asarray(bounds, dtype=np.float64), want.shape)
  bad = np.asarray(bad).reshape(want.shape)   # (some helpers give a 0-d result shape (1,))
  idx = [tuple(int(v) for v in i) for i in np.argwhere(bad)[:limit]] if bad.ndim else [()]
  def fmt(i):
    if not _is_float(dt): return f"at {i}: got {show_value(got[i])}, expected {show_value(want[i])}"
    tol = " (bit-exact)" if b[i] == 0 else " (equal, either zero)" if b[i] < 1 else f" (within {b[i]:g} ulp)"
    also = [show_value(np.asarray(a)[i], True) for a in alternatives if show_value(np.asarray(a)[i], True) != show_value(want[i], True)]
    alt = f" or {' or '.join(dict.fromkeys(also))}" if also else ""
    return f"at {i}: got {show_value(got[i], True)}, expected {show_value(want[i], True)}{alt}{apart(got[i], want[i])}{tol}"
  return f"{int(bad.sum())} of {bad.size} elements differ; " + "; ".join(fmt(i) for i in idx)


# ------------------------------------------------------------------ bounds from the table
def _elementwise(op: str) -> bool:
  return op in tables().alu_ops


def element_bounds(op: str, arg, dt: str, operands: list, want, decomposed: bool = False, profile: str = "strict") -> np.ndarray | float:
  """Per-element ulp bounds for a result of `op` (dtype dt) computed from `operands` (the
  values of its value sources) whose reference value is `want`, in a conformance profile
  (its accuracy half: tinyspec.portable adds the allowed results). A scalar 0.0 when the
  result must be exact everywhere."""
  want = np.asarray(want)
  if not _is_float(dt): return 0.0
  t = tables().tolerances.get(op, {})
  if "ulp_per_element" in t: return _reduce_bounds(t["ulp_per_element"], arg, operands, want, dt)
  ulp, dom = tolerance(op, dt, decomposed, profile)
  if ulp == 0 and dom is None: return 0.0
  if not _elementwise(op) or not operands: return float(ulp)
  xs = [np.asarray(x) for x in operands]
  try: shape = np.broadcast_shapes(want.shape, *[x.shape for x in xs])
  except ValueError: return float(ulp)
  if shape != want.shape: return float(ulp)
  b = np.full(want.shape, float(ulp))
  if dom is not None: b[~np.broadcast_to(in_domain(op, dt, xs, decomposed), want.shape)] = np.inf
  with np.errstate(invalid="ignore", over="ignore"):
    for x in xs:
      if _is_float_array(x): b[~np.broadcast_to(np.isfinite(x.astype(np.float64)), want.shape)] = 0.0
  return b


def _is_float_array(x) -> bool: return is_float_type(x.dtype)


def _reduce_bounds(per: float, arg, operands: list, want, dt: str):
  rop = (arg or {}).get("op")
  if rop == "MAX" or not operands: return 0.0
  x = np.asarray(operands[0])
  axes = tuple((arg or {}).get("axes") or ())
  n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
  if n <= 1: return 0.0
  if rop == "MUL": return float(per * n)
  with np.errstate(invalid="ignore", over="ignore"):
    x64 = x.astype(np.float64)
    special = ~np.isfinite(x64).all(axis=axes, keepdims=True) if axes else ~np.isfinite(x64)
    total = np.abs(x64).sum(axis=axes, keepdims=True) if axes else np.abs(x64)
    fmax = float(np.finfo(np.float64).max) if dt == "float64" else _fmax(dt)
    allowed = per * n * _spacing(total, dt)
    ulps = np.ceil(allowed / _spacing(np.abs(want.astype(np.float64)), dt))
    b = np.where(total > fmax, np.inf, ulps)
  b = np.where(special, 0.0, b)
  return np.broadcast_to(b, want.shape).astype(np.float64)


def _fmax(dt: str) -> float:
  d = DTYPES[dt]
  return float(d.normal_range[1])


def _spacing(mag: np.ndarray, dt: str) -> np.ndarray:
  """The distance from |x| to the next representable value of dt (at least the smallest
  subnormal), computed in float64."""
  d = DTYPES[dt]
  tiny = 2.0 ** (1 - d.exponent_bias - d.mantissa)   # smallest subnormal
  with np.errstate(divide="ignore", invalid="ignore"):
    e = np.floor(np.log2(np.maximum(mag, tiny)))
  return np.maximum(2.0 ** (e - d.mantissa), tiny)
