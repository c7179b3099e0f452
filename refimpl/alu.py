"""One elementwise op on NumPy values through the reference's own unit: the `python_alu`
that the compiler's checkers (local-memory races, index analyses) evaluate with, so an op's
meaning lives in one place (refimpl/ops/).

    alu("IDIV", "index", np.array([-7]), np.int64(2))   # -> array([-4]): floor division
"""
from __future__ import annotations
import numpy as np
from tinyspec.intervals import np_dtype
from tinyspec.tables import tables
from tinyspec.refimpl.registry import UNITS


class _Ctx:
  """The part of a node's context an elementwise unit reads: its op, dtype and arg, and its
  sources' dtypes."""
  __slots__ = ("op", "dtype", "arg", "_src")

  def __init__(self, op: str, dtype: str, src_dtypes: tuple, arg=None):
    self.op, self.dtype, self.arg, self._src = op, dtype, arg, src_dtypes

  def src_dtype(self, k: int) -> str: return self._src[k]


def has_alu(op: str) -> bool:
  """Whether op is an elementwise op the reference has a unit for."""
  return op in tables().alu_ops and op in UNITS and not UNITS[op].raw


def alu(op: str, dtype: str, *xs, src_dtypes: tuple | None = None, arg=None):
  """op's value of xs (NumPy arrays or scalars, broadcast together) as a node of `dtype`
  computes it: the sources are converted to their dtypes' NumPy types first (src_dtypes,
  default all `dtype`; a compare's result is bool)."""
  if not has_alu(op): raise KeyError(f"{op} is not an elementwise op of the reference")
  src_dtypes = src_dtypes or (dtype,) * len(xs)
  vals = [np.asarray(x).astype(np_dtype(d), copy=False) for x, d in zip(xs, src_dtypes)]
  return UNITS[op].fn(_Ctx(op, dtype, tuple(src_dtypes), arg), *vals)
