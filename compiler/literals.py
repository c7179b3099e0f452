"""The literals the compiler's stages write: CONST and index VCONST nodes."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt


class LiteralRange(ValueError):
  """The compiler tried to make an integer constant its dtype cannot hold: a bug of the
  stage that asked (a rewrite must reduce its constants into the dtype or decline)."""


def const(value, dtype: str) -> UOp:
  """A CONST node; Python bools/ints/floats are normalised to the dtype's kind so that
  equal constants are the same hash-consed node. An integer outside the dtype's range
  raises LiteralRange: no stage may write a literal the type cannot hold (C would
  truncate it silently)."""
  d = _dt(dtype)
  if d.cls == "bool": value = bool(value)
  elif d.cls == "float":
    if isinstance(value, str): pass
    else:
      value = float(value)
      if value != value: value = "nan"
      elif value in (float("inf"), float("-inf")): value = "inf" if value > 0 else "-inf"
  else:
    value = int(value)
    if not d.min <= value <= d.max: raise LiteralRange(f"the constant {value} is not a value of {dtype} [{d.min}, {d.max}]")
  return UOp("CONST", (), {"value": value, "dtype": dtype})


def shape_operand(dims) -> UOp:
  """The index VCONST that spells a shape."""
  return UOp("VCONST", (), {"values": [int(d) for d in dims], "dtype": "index"})
