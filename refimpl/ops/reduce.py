"""REDUCE: ADD, MUL or MAX over axes (tensor level) or over the iterations of RANGE
sources (kernel level, where each RANGE is an array axis).

Float ADD and MUL fold the elements in iteration order (row-major over the reduced axes),
starting from the identity: the loop a kernel runs (acc = 0; acc += x), as tinygrad's
PYTHON device does, and the same bits on every host (decision reduce-empty allows other
orders within the REDUCE tolerance; NumPy's pairwise sum and BLAS order by CPU). One
element (no axes, or reduced axes and RANGEs of size 1) is itself, nothing folded in
(decision reduce-one: -0.0 stays -0.0 under ADD, NaN stays NaN under MAX). float32
and float64 accumulate in the dtype; float16 and bfloat16 accumulate in float32 and round
once. Integers wrap (int-wrap) and MAX is exact, in any order. MAX skips NaN and prefers
+0 over -0 (reduce-max). Empty: the identity.

A REDUCE(ADD) over a MUL whose product is large and broadcast (the Dialect document's gemm
`(A.reshape(M,K,1) * B.reshape(1,K,N)).sum(1)`) never builds the (M,K,N) product: it
multiplies a block of the reduced axis at a time and folds it into the running sums, in
the same order and roundings as building the product would (Plan.FUSE_MIN_ELEMENTS
decides when; small products are built as written).
"""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NARROW, VIA_F32, EXTENDED_FLOATS, F32, down, CLS, NP, broadcast_shape
from tinyspec.tables import tables


def identity(op: str, name: str):
  """What an empty `op` reduction of dtype `name` gives (ops.yaml reduce_ops)."""
  return np.asarray(tables().reduce_identity(op, name), NP[name])


BLOCK = 1 << 24   # source elements one NumPy call reduces at most (a larger source goes block by block)


def reduce_values(op: str, x: np.ndarray, dims: tuple, name: str) -> np.ndarray:
  if all(x.shape[d] == 1 for d in dims): return x   # one element (decision reduce-one): itself, nothing folded in
  if x.size > BLOCK: return _in_blocks(op, x, dims, name)
  cls = CLS[name]
  if op == "MAX":   # decision reduce-max: the largest non-NaN element, +0 above -0; -inf if none
    xs = x.astype(F32) if name in VIA_F32 else x
    fn = np.fmax if cls == "float" else np.maximum   # fmax skips NaN
    r = fn.reduce(xs, axis=dims, keepdims=True, initial=identity(op, name).astype(xs.dtype))
    if cls == "float" and np.any(r == 0):   # make any +0 win over -0
      pos0 = np.logical_or.reduce((xs == 0) & ~np.signbit(xs), axis=dims, keepdims=True)
      r = np.where(r == 0, np.where(pos0, np.zeros((), r.dtype), -np.zeros((), r.dtype)), r)
    return down(r, name) if name in VIA_F32 else r
  fn = np.add if op == "ADD" else np.multiply
  if cls != "float": return fn.reduce(x, axis=dims, keepdims=True, dtype=x.dtype)   # modular: any order
  acc = identity(op, name).astype(F32 if name in NARROW else x.dtype)
  acc = np.broadcast_to(acc, tuple(1 if d in dims else n for d, n in enumerate(x.shape)))
  return down(fold(fn, acc, x, dims), name)


def _in_blocks(op: str, x: np.ndarray, dims: tuple, name: str) -> np.ndarray:
  """reduce_values over a source of more than BLOCK elements (often a broadcast view that
  costs nothing until it is read), a block at a time: memory stays bounded and a time
  limit can stop it between blocks. The source is split along its outermost axis longer
  than 1; pieces of a kept axis are concatenated, pieces of a reduced axis combined in
  order -- float ADD and MUL go on folding from the previous piece's partial result, so
  the loop order (and every bit) is the unblocked one's."""
  cls = CLS[name]
  if op != "MAX" and cls == "float":
    acc = identity(op, name).astype(F32 if name in NARROW else x.dtype)
    acc = np.broadcast_to(acc, tuple(1 if d in dims else n for d, n in enumerate(x.shape)))
    return down(_fold_in_blocks(np.add if op == "ADD" else np.multiply, acc, x, dims), name)
  ax, step = _split(x)
  parts = (reduce_values(op, x[_along(ax, k, step)], dims, name) for k in range(0, x.shape[ax], step))
  if ax not in dims: return np.concatenate(list(parts), axis=ax)
  r = next(parts)
  for p in parts: r = _combine(op, cls, r, p)
  return r


def _split(x: np.ndarray) -> tuple[int, int]:
  """(the outermost axis longer than 1, how many of its indices make a block of about BLOCK elements)."""
  ax = next(a for a in range(x.ndim) if x.shape[a] > 1)
  return ax, max(1, x.shape[ax] * BLOCK // x.size)


def _along(ax: int, k: int, step: int) -> tuple:
  return (slice(None),) * ax + (slice(k, k + step),)


def _combine(op: str, cls: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Two partial results of an integer/bool ADD or MUL (wrapping: any order) or a MAX."""
  if op == "ADD": return np.add(a, b, dtype=a.dtype)
  if op == "MUL": return np.multiply(a, b, dtype=a.dtype)
  if cls != "float": return np.maximum(a, b)
  af, bf = (t.astype(F32) if t.dtype in EXTENDED_FLOATS.values() else t for t in (a, b))
  r = np.where((af == 0) & (bf == 0), np.where(np.signbit(af), bf, af), np.maximum(af, bf))   # NaN wins, +0 over -0 (max-nan)
  return r.astype(a.dtype)


def _fold_in_blocks(fn, acc: np.ndarray, x: np.ndarray, dims: tuple) -> np.ndarray:
  if x.size <= BLOCK: return fold(fn, acc, x, dims)
  ax, step = _split(x)
  if ax in dims:
    for k in range(0, x.shape[ax], step): acc = _fold_in_blocks(fn, acc, x[_along(ax, k, step)], dims)
    return acc
  return np.concatenate([_fold_in_blocks(fn, acc[_along(ax, k, step)], x[_along(ax, k, step)], dims)
                         for k in range(0, x.shape[ax], step)], axis=ax)


FOLD_BLOCK = 1 << 22   # elements folded per ufunc.accumulate call (bounds its scratch array)


def fold(fn, acc: np.ndarray, x: np.ndarray, dims: tuple) -> np.ndarray:
  """acc (keepdims-shaped) folded with the elements of x along `dims`, one after another in
  row-major order: ((acc fn x0) fn x1) ... . ufunc.accumulate is sequential by definition
  (each partial result is stored), so this is the loop's order on every host. Computed in
  acc's dtype; blocks of the reduced elements keep the scratch bounded."""
  keep = [d for d in range(x.ndim) if d not in dims]
  y = np.moveaxis(x, dims, range(len(keep), x.ndim)).astype(acc.dtype, copy=False)
  y = y.reshape(y.shape[:len(keep)] + (int(np.prod(y.shape[len(keep):], dtype=np.int64)),))
  out = np.moveaxis(acc, dims, range(len(keep), x.ndim)).reshape(y.shape[:-1] + (1,))
  n = y.shape[-1]
  step = max(1, FOLD_BLOCK // max(1, out.size))
  for k in range(0, n, step):
    out = fn.accumulate(np.concatenate([out, y[..., k:k + step]], axis=-1), axis=-1)[..., -1:]
  return out.reshape(acc.shape)


def sum_of_product(a: np.ndarray, b: np.ndarray, dims: tuple, acc_dtype) -> np.ndarray:
  """sum over `dims` of a*b (a, b broadcast; products rounded in a's dtype, summed in
  acc_dtype in iteration order from +0), without building the whole product: a block of
  the reduced elements at a time."""
  nd = max(a.ndim, b.ndim)
  a = a.reshape((1,) * (nd - a.ndim) + a.shape)
  b = b.reshape((1,) * (nd - b.ndim) + b.shape)
  full = broadcast_shape(a.shape, b.shape)
  acc = np.zeros(tuple(1 if d in dims else n for d, n in enumerate(full)), acc_dtype)
  # the reduced axes flattened in row-major order, split into blocks of whole index tuples
  red = [d for d in dims if full[d] != 1]
  if not red: return np.multiply(a, b).astype(acc_dtype)   # one product: itself (decision reduce-one)
  lead, inner = red[0], int(np.prod([full[d] for d in red[1:]], dtype=np.int64))
  per = max(1, FOLD_BLOCK // max(1, int(np.prod([n for d, n in enumerate(full) if d not in dims], dtype=np.int64)) * inner))
  for k in range(0, full[lead], per):
    sl = tuple(slice(k, k + per) if d == lead else slice(None) for d in range(nd))
    pa, pb = (t[sl] if t.shape[lead] != 1 else t for t in (a, b))
    acc = fold(np.add, acc, np.multiply(pa, pb), dims)
  return acc


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
    name = ctx.dtype
    r = sum_of_product(*s.full_along(ranges, a, b), dims, F32 if name in NARROW else NP[name])
    return down(r, name)
  x = ctx.value(0)
  if ranges:
    (x,) = s.full_along(ranges, x)
    valid = s.loop_validity(ranges)
    if valid is not None: x = np.where(valid.reshape(valid.shape + (1,) * (x.ndim - valid.ndim)), x, identity(op, ctx.dtype))
  return reduce_values(op, x, dims, ctx.dtype)
