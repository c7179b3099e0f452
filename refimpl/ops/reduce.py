"""REDUCE: ADD, MUL or MAX over axes (tensor level) or over the iterations of RANGE
sources (kernel level, where each RANGE is an array axis).

ADD and MUL of float32/float64 run in the dtype (NumPy's pairwise sum); float16 and
bfloat16 accumulate in float32 and round once (decision reduce-empty allows any
association; the REDUCE tolerance is scaled by the size). Integers wrap (int-wrap).
MAX propagates NaN and prefers +0 over -0 (max-nan). Empty: the identity.

A REDUCE(ADD) over a MUL whose product is large and broadcast (the seed's gemm
`(A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1)`) is computed as one einsum, which never
builds the (M,K,N) product: NumPy hands it to BLAS in the same dtype. Only the summation
order and fused multiply-adds differ from building the product -- within the REDUCE
tolerance. Plan.FUSE_MIN_ELEMENTS decides when (small products are built as written).
"""
from __future__ import annotations
import string
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NARROW, F32, down, CLS, NP
from tinyspec.dtypes import DTYPES


def identity(op: str, name: str):
  cls = CLS[name]
  if op == "ADD": return np.zeros((), NP[name])
  if op == "MUL": return np.ones((), NP[name])
  if cls == "float": return np.asarray(-np.inf, NP[name])
  if cls == "bool": return np.asarray(False)
  return np.asarray(DTYPES[name].min, NP[name])


def reduce_values(op: str, x: np.ndarray, dims: tuple, name: str) -> np.ndarray:
  if not dims: return x
  cls = CLS[name]
  if op == "MAX":
    xs = x.astype(F32) if name == "bfloat16" else x
    r = np.maximum.reduce(xs, axis=dims, keepdims=True, initial=identity(op, name).astype(xs.dtype))
    if cls == "float" and np.any(r == 0):   # np.maximum keeps -0 over +0: make any +0 win
      pos0 = np.logical_or.reduce((xs == 0) & ~np.signbit(xs), axis=dims, keepdims=True)
      r = np.where((r == 0) & pos0, np.zeros((), r.dtype), r)
    return down(r, name) if name == "bfloat16" else r
  fn = np.add if op == "ADD" else np.multiply
  if name in NARROW: return down(fn.reduce(x.astype(F32), axis=dims, keepdims=True), name)
  return fn.reduce(x, axis=dims, keepdims=True, dtype=x.dtype)


def sum_of_product(a: np.ndarray, b: np.ndarray, dims: tuple) -> np.ndarray:
  """sum over `dims` of a*b (a, b broadcast), without building the product."""
  nd = max(a.ndim, b.ndim)
  a = a.reshape((1,) * (nd - a.ndim) + a.shape)
  b = b.reshape((1,) * (nd - b.ndim) + b.shape)
  full = np.broadcast_shapes(a.shape, b.shape)
  letters = string.ascii_letters
  sa = "".join(letters[d] for d in range(nd) if a.shape[d] != 1)
  sb = "".join(letters[d] for d in range(nd) if b.shape[d] != 1)
  so = "".join(letters[d] for d in range(nd) if d not in dims and full[d] != 1)
  out = np.einsum(f"{sa},{sb}->{so}", a.reshape([n for n in a.shape if n != 1]), b.reshape([n for n in b.shape if n != 1]),
                  optimize=True)
  return np.asarray(out, dtype=a.dtype).reshape(tuple(1 if d in dims else n for d, n in enumerate(full)))


@unit("REDUCE", raw=True, role="reduce")
def reduce_(ctx):
  s, node = ctx.s, ctx.node
  op, R = ctx.arg["op"], ctx.R
  dims = tuple(R + a for a in ctx.arg.get("axes", ()))
  ranges = node.src[1:]
  if ranges: dims = tuple(sorted(s.plan.axis_of[r] for r in ranges))
  src = node.src[0]
  if s.plan.fused.get(src) == ctx.i:
    a, b = (s.values[j] for j in s.m.nodes[src].src)
    a, b = s.align(a, len(ctx.src_shape(0))), s.align(b, len(ctx.src_shape(0)))
    return sum_of_product(*s.full_along(ranges, a, b), dims)
  x = ctx.value(0)
  if ranges:
    (x,) = s.full_along(ranges, x)
    valid = s.loop_validity(ranges)
    if valid is not None: x = np.where(valid.reshape(valid.shape + (1,) * (x.ndim - valid.ndim)), x, identity(op, ctx.dtype))
  return reduce_values(op, x, dims, ctx.dtype)
