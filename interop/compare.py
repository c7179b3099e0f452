"""Comparing tinygrad's results with the reference evaluator's.

Integers and bools must be equal. Floats are compared in units in the last place
(tinyspec.tolerance.ulp_distance: NaN matches NaN, +0 matches -0) and pass within
FLOAT_ULP ulps, or within FLOAT_ABS times the largest magnitude of the expected array: a
sum whose terms cancel (a mean near zero) is accurate to its terms' scale, not its own,
and tinygrad and the reference add in different orders (decision reduce-empty lets any
order stand). tinygrad computes EXP2/LOG2/SIN/SQRT through its own polynomial
decompositions on CPU, a few ulps from the correctly rounded results the reference gives.
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np

FLOAT_ULP = 64
FLOAT_ABS = 1e-5


@dataclass
class Comparison:
  ok: bool
  max_ulp: float = 0.0
  message: str = ""

  def __str__(self): return self.message


def compare(want: np.ndarray, got: np.ndarray) -> Comparison:
  """Does got (the reference evaluator's) match want (tinygrad's)?"""
  from tinyspec.tolerance import ulp_distance
  want, got = np.asarray(want), np.asarray(got)
  if want.shape != got.shape:
    if want.size == got.size: got = got.reshape(want.shape)
    else: return Comparison(False, message=f"shape {got.shape} != tinygrad's {want.shape}")
  if want.dtype != got.dtype: return Comparison(False, message=f"dtype {got.dtype} != tinygrad's {want.dtype}")
  if want.dtype.kind != "f" and want.dtype.name != "bfloat16":
    bad = np.flatnonzero(want.ravel() != got.ravel())
    if not len(bad): return Comparison(True, message="exact")
    i = bad[0]
    return Comparison(False, message=f"{len(bad)} of {want.size} elements differ; first at {np.unravel_index(i, want.shape)}: "
                                     f"reference {got.ravel()[i]!r}, tinygrad {want.ravel()[i]!r}")
  ulp = ulp_distance(got, want)
  if not ulp.size or not ulp.max(): return Comparison(True, message="exact")
  w64, g64 = want.astype(np.float64), got.astype(np.float64)
  finite = np.isfinite(w64)
  scale = float(np.abs(w64[finite]).max()) if finite.any() else 0.0
  with np.errstate(invalid="ignore"):
    close = (ulp <= FLOAT_ULP) | (np.abs(w64 - g64) <= FLOAT_ABS * scale)
  worst = float(ulp.max())
  if close.all(): return Comparison(True, worst, f"max {worst:g} ulp")
  i = int(np.flatnonzero(~close.ravel())[0])
  return Comparison(False, worst, f"{int((~close).sum())} of {want.size} elements differ (max {worst:g} ulp); first at "
                                  f"{np.unravel_index(i, want.shape)}: reference {got.ravel()[i]!r}, tinygrad {want.ravel()[i]!r}")
