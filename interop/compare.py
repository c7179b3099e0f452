"""Comparing tinygrad's results with the reference evaluator's.

Integers and bools must be equal, except where the bound is inf (an integer taken from an
inexact float: not judged, counted as unbounded) and, for a bool, where it is above 0 (the
bound's "both values": a comparison whose operands may cross, or that a flushed subnormal
operand may flip, as the tables allow: not judged, counted as unbounded). Floats are judged under the portable
profile: each element must lie within the forward error bound that tinyspec/errorbound.py propagates
through the graph from the tables (every op's `portable_ulp`, contraction into MULACC,
flushed subnormals, a reduction's `ulp_per_element` in any order over the magnitude of its
terms, so a sum whose terms cancel is judged at its terms' scale). NaN matches NaN and +0
matches -0; where the bound is inf (an op outside its domain, an integer or an index taken
from an inexact float) the element is counted as unbounded, not judged.

A graph the bound cannot be built for is judged by ulps alone (FLOAT_ULP), and says so.
"""
from __future__ import annotations
from dataclasses import dataclass
import numpy as np
from tinyspec.tolerance import ulp_distance
from tinyspec.intervals import is_float_type

FLOAT_ULP = 64


@dataclass
class Comparison:
  ok: bool
  max_ulp: float = 0.0
  message: str = ""
  unbounded: int = 0   # float elements the bound leaves unchecked

  def __str__(self): return self.message


def compare(want: np.ndarray, got: np.ndarray, bound=None, who: str = "reference") -> Comparison:
  """Does got (the reference evaluator's) match want (tinygrad's)? bound: the absolute
  error bound of each element of got (tinyspec/errorbound.py), or None to judge floats by ulps."""
  want, got = np.asarray(want), np.asarray(got)
  if want.shape != got.shape:
    if want.size == got.size: got = got.reshape(want.shape)
    else: return Comparison(False, message=f"shape {got.shape} != tinygrad's {want.shape}")
  if want.dtype != got.dtype: return Comparison(False, message=f"dtype {got.dtype} != tinygrad's {want.dtype}")
  if not is_float_type(want.dtype):
    # exact, except where the bound is inf (an integer taken from an inexact float: a CAST, a BITCAST) or a bool's is above 0
    b = _bound_like(bound, want.shape).ravel() if bound is not None else np.zeros(want.size)
    loose = np.isinf(b) | ((b > 0) if want.dtype == np.bool_ else False)
    bad = np.flatnonzero((want.ravel() != got.ravel()) & ~loose)
    unbounded = int(loose.sum())
    note = f"; {unbounded} of {want.size} unbounded" if unbounded else ""
    if not len(bad): return Comparison(True, message="exact" + note, unbounded=unbounded)
    i = bad[0]
    return Comparison(False, message=f"{len(bad)} of {want.size} elements differ; first at {tuple(int(j) for j in np.unravel_index(i, want.shape))}: "
                                     f"{who} {got.ravel()[i]!r}, tinygrad {want.ravel()[i]!r}{note}", unbounded=unbounded)
  ulp = ulp_distance(got, want)
  worst = float(ulp.max()) if ulp.size else 0.0
  if not worst: return Comparison(True, message="exact")
  if bound is None:
    close, unbounded, how = ulp <= FLOAT_ULP, 0, f"within {FLOAT_ULP} ulp (no error bound)"
  else:
    from tinyspec.errorbound import within  # noqa: PLC0415 (start-up time: the error bounds take 0.1-0.2 s to import; only a float judged against a bound needs them)
    b = _bound_like(bound, want.shape)
    close, unbounded, how = within(got, want, b), int(np.isinf(b).sum()), "within the portable bound"
  if close.all():
    note = f"; {unbounded} of {want.size} unbounded" if unbounded else ""
    return Comparison(True, worst, f"max {worst:g} ulp, {how}{note}", unbounded)
  i = int(np.flatnonzero(~close.ravel())[0])
  extra = f" (bound {np.ravel(b)[i]:.3g})" if bound is not None else ""
  return Comparison(False, worst, f"{int((~close).sum())} of {want.size} elements outside the portable bound (max {worst:g} ulp); "
                                  f"first at {tuple(int(j) for j in np.unravel_index(i, want.shape))}: {who} {got.ravel()[i]!r}, tinygrad "
                                  f"{want.ravel()[i]!r}{extra}", unbounded)


def _bound_like(bound, shape) -> np.ndarray:
  b = np.asarray(bound, np.float64)
  return b.reshape(shape) if b.size == int(np.prod(shape)) else np.broadcast_to(b, shape)
