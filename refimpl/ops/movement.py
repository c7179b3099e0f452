"""Movement ops: views where NumPy has them (PERMUTE, FLIP, RESHAPE when contiguous,
EXPAND as a zero-copy broadcast, SHRINK), copies where it has not (PAD, STACK, INDEX).
All but INDEX, STACK and BITCAST exist only at tensor level (no loop axes)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import broadcast_shape



@unit("PERMUTE", alloc=0)
def permute(ctx, x): return np.transpose(x, ctx.arg)


@unit("FLIP", alloc=0)
def flip(ctx, x): return x[tuple(slice(None, None, -1) if f else slice(None) for f in ctx.arg)]


@unit("RESHAPE", alloc=0)
def reshape(ctx, x, _s):
  """A view of a contiguous array; any other (a broadcast EXPAND, say) may be copied, which
  asks the budget first (NumPy copies before it finds out)."""
  if not x.flags.c_contiguous: ctx.need(x.dtype.itemsize * int(np.prod(ctx.shape, dtype=np.int64)))
  return x.reshape(ctx.shape)


@unit("EXPAND", alloc=0)
def expand(ctx, x, _s): return np.broadcast_to(x, ctx.shape)


@unit("PAD")
def pad(ctx, x, _o, _s):
  """T placed at offset o; everything else is invalid and reads as zero (decision pad-fill)."""
  o = ctx.shape_value(1)
  out = np.zeros(ctx.shape, x.dtype)
  out[tuple(slice(a, a + n) for a, n in zip(o, x.shape))] = x
  return out


@unit("SHRINK", alloc=0)
def shrink(ctx, x, _o, _s):
  o, s = ctx.shape_value(1), ctx.shape_value(2)
  return x[tuple(slice(a, a + n) for a, n in zip(o, s))]


@unit("INDEX", raw=True, role="through")
def index(ctx):
  """Outer indexing from the left (()-shaped indices remove their axis, (k,)-shaped ones
  make it k). Out of range: zero at every level (decisions index-oob, pad-fill); with
  strict_bounds an ungated out-of-range kernel read is refused, see Scope.read_index."""
  return ctx.s.read_index(ctx.i, ctx.value(0))   # the index values only where no strided view does it (refimpl/affine.py)


@unit("STACK")
def stack(ctx, *xs):
  R = ctx.R
  if R:
    full = broadcast_shape(*[x.shape[:R] for x in xs])
    xs = [np.broadcast_to(x, full + x.shape[R:]) for x in xs]
  return np.stack(xs, axis=R)


