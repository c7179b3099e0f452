"""The nodes every Tensor method builds from: dtype names, CONSTs and shape operands."""
from __future__ import annotations
import functools
import math
import numpy as np
from tinyspec.uop import UOp
from tinyspec.frozen import key as _frozen_key
from tinyspec.dtypes import DTYPES, canonical
from tinyspec.intervals import NUMPY_TYPES


def dtype_name(dt) -> str:
  """A spec dtype name from a name, an alias, a NumPy dtype or a Python type."""
  if dt in (bool, int, float): return _PY_DEFAULT[dt]
  if isinstance(dt, str) and (name := canonical(dt)) is not None: return name
  try: npd = np.dtype(dt)
  except TypeError: npd = None
  if npd is not None and npd.name in _FROM_NP: return _FROM_NP[npd.name]
  raise TypeError(f"unknown dtype {dt!r}")


_PY_DEFAULT = {bool: "bool", int: "int32", float: "float32"}
# NumPy dtype name -> spec dtype; `index` is stored as int64 but int64 is its own dtype
_FROM_NP = {t.name: n for n, t in NUMPY_TYPES.items() if DTYPES[n].cls != "index"}


def _is_float(dt: str) -> bool: return DTYPES[dt].cls == "float"


def const_value(v, dt: str):
  """A Python value as a CONST arg value of dtype dt (NaN and infinities as the file
  format's strings)."""
  cls = DTYPES[dt].cls
  if isinstance(v, np.generic): v = v.item()
  if cls == "float":
    v = float(v)
    if math.isnan(v): return "nan"
    if math.isinf(v): return "inf" if v > 0 else "-inf"
    return v
  if cls == "bool":
    if v in (0, 1): return bool(v)
    raise TypeError(f"{v!r} is not a bool")
  if isinstance(v, float):
    if not v.is_integer(): raise TypeError(f"{v!r} is not an integer; .cast() the tensor to a float dtype first")
    v = int(v)
  return int(v)


def const(v, dt: str) -> UOp:
  cv = const_value(v, dt)
  return _const(dt, _frozen_key(cv), cv)


@functools.lru_cache(maxsize=4096)
def _const(dt: str, k, cv) -> UOp:
  """The CONST node of a value (keyed so that -0.0, 0.0 and 0 stay apart): a chain
  `x + 1.0` repeated builds the node once, not once per op."""
  return UOp("CONST", (), {"value": cv, "dtype": dt})


def shape_uop(dims) -> UOp:
  """A shape operand: an index VCONST holding the dims."""
  return UOp("VCONST", (), {"values": [int(d) for d in dims], "dtype": "index"})
