"""Source ops: constants and storage roots."""
from __future__ import annotations
import base64
import math
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NP, CLS, from_f64
from tinyspec.refimpl.storage import flatten_after


def const_value(v, name: str) -> np.ndarray:
  """A constant of the table's number form (numbers, bools, "nan"/"inf"/"-inf") in dtype
  `name`; floats are rounded once to nearest even."""
  cls = CLS[name]
  if cls == "bool": return np.asarray(bool(v))
  if cls == "float":
    f = float(v) if not isinstance(v, str) else {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[v]
    return from_f64(np.asarray(f), name)
  return np.asarray(int(v), dtype=NP[name])


@unit("CONST")
def const(ctx): return const_value(ctx.arg["value"], ctx.dtype)


@unit("VCONST")
def vconst(ctx):
  vals = ctx.arg["values"]
  if not vals: return np.zeros((0,), NP[ctx.dtype])
  return np.stack([const_value(v, ctx.dtype) for v in vals]) if CLS[ctx.dtype] == "float" else np.asarray(
    [bool(v) if CLS[ctx.dtype] == "bool" else int(v) for v in vals], dtype=NP[ctx.dtype])


@unit("BINARY")
def binary(ctx): return np.frombuffer(base64.b64decode(ctx.arg["data"]), dtype=np.uint8)


@unit("BUFFER", "PARAM", raw=True, role="storage", alloc=0)
def storage_root(ctx):
  """Its contents: the input (or zeros) at first, then whatever STOREs ordered before a
  reader made of it (seen through AFTER, see refimpl/storage.py)."""
  return ctx.s.root_value(ctx.i)


@unit("BUFFER_VIEW", role="view", alloc=0)
def buffer_view(ctx, x):
  """`size` elements of `dtype` starting `offset` bytes into the buffer's bytes."""
  return byte_view(x, ctx.R, ctx.arg["offset"], ctx.arg["size"], NP[ctx.arg["dtype"]])


def byte_view(x: np.ndarray, R: int, offset: int, size: int, dt: np.dtype) -> np.ndarray:
  flat = flatten_after(np.ascontiguousarray(x), R)
  b = flat.view(np.uint8)
  part = b[..., offset:offset + size * dt.itemsize]
  if dt == np.bool_: return part != 0   # a byte read as bool is true when nonzero (decision bitcast-nan): only 0 and 1
  return part.view(dt)
