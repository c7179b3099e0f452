"""Inline arrays of the backend protocol: an array written into the message itself.

    {"dtype": "float32", "shape": [3], "data": [1065353216, 2147483648, 2143289344]}   # 1.0, -0.0, NaN

`data` holds the elements in row-major order, each a JSON integer: the value for integer
dtypes (index is int64), 0 or 1 for bool, and for float dtypes the IEEE bit pattern as an
unsigned integer of the dtype's width, so NaN payloads and the sign of zero travel
exactly (spec/protocol.schema.json `inline_array`). Arrays here are in the corpus's
storage form (conformance/corpus/cases.py: bfloat16 as its uint16 bit patterns), as the
.npy encoding carries them, so both encodings give the runner the same arrays.
"""
from __future__ import annotations
import numpy as np
from tinyspec.dtypes import DTYPES
from tinyspec.limits import limits
from tinyspec.intervals import EXTENDED_FLOATS


class BadArray(ValueError):
  """An inline array that is not of the protocol's form (its message says which part)."""


def _element_range(dt) -> tuple[int, int, np.dtype]:
  """(lowest, highest, NumPy container) of the integers `data` may hold for dtype dt."""
  if dt.cls == "bool": return 0, 1, np.dtype(np.uint8)
  if dt.cls in ("int", "index"): return -(1 << (dt.bits - 1)), (1 << (dt.bits - 1)) - 1, np.dtype(f"int{dt.bits}")
  return 0, (1 << dt.bits) - 1, np.dtype(f"uint{dt.bits}")   # uint values, and the bit patterns of floats


def encode(array, dtype: str) -> dict:
  """The inline form of `array` (storage form) of tinyspec dtype `dtype`."""
  dt = DTYPES[dtype]
  a = np.array(array, order="C")   # (not ascontiguousarray: it makes a ()-shaped array (1,))
  _, _, container = _element_range(dt)
  bits = a.astype(container) if dt.cls == "bool" else a.view(container) if a.dtype.itemsize == container.itemsize else a.astype(container)
  return {"dtype": dtype, "shape": [int(d) for d in a.shape], "data": bits.reshape(-1).tolist()}


def decode(obj, what: str = "array") -> np.ndarray:
  """The array (storage form) of an inline array; BadArray saying what is wrong otherwise:
  an unknown dtype, a shape over limits.max_rank or limits.max_numel, a count of elements
  other than the shape's, an element that is not an integer or out of the dtype's range."""
  if not isinstance(obj, dict) or set(obj) != {"dtype", "shape", "data"}:
    raise BadArray(f"{what}: an inline array is an object with exactly dtype, shape and data")
  name, shape, data = obj["dtype"], obj["shape"], obj["data"]
  dt = DTYPES.get(name) if isinstance(name, str) else None
  if dt is None or dt.cls == "void": raise BadArray(f"{what}: dtype {str(name)[:40]!r} is not a dtype of the tables")
  L = limits()
  if not isinstance(shape, list) or len(shape) > L.max_rank or not all(type(d) is int and 0 <= d <= L.max_numel for d in shape):
    raise BadArray(f"{what}: shape must be a list of at most {L.max_rank} integers >= 0")
  count = 1
  for d in shape: count *= d
  if count > L.max_numel: raise BadArray(f"{what}: shape {shape} has more than limits.max_numel elements")
  if not isinstance(data, list) or len(data) != count:
    raise BadArray(f"{what}: data must list the shape's {count} elements, not {len(data) if isinstance(data, list) else 'a ' + type(data).__name__}")
  lo, hi, container = _element_range(dt)
  if not all(type(x) is int for x in data): raise BadArray(f"{what}: every element of data must be a JSON integer")
  if data and (min(data) < lo or max(data) > hi):
    raise BadArray(f"{what}: an element of data is outside {lo}..{hi}, the range of {name}" + (" bit patterns" if dt.is_float else ""))
  a = np.array(data, dtype=container).reshape(shape)
  if dt.cls == "bool": return a.astype(np.bool_)
  if dt.is_float and name not in EXTENDED_FLOATS: return a.view(np.dtype(dt.np))
  return a
