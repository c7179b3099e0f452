"""Multi-device ops. A value on an n-tuple device is the full logical array; the shard
axis (the derived `axis` property) says how it is split, which changes no value. COPY
(resharding or gathering) therefore keeps the data; REPLICATED checks that every slice
along its axes holds the same data and keeps slice 0 (decision replicated-check)."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.errors import EvalError


@unit("COPY", alloc=0)
def copy(ctx, x): return x


@unit("REPLICATED", alloc=0)
def replicated(ctx, x):
  axes = tuple(ctx.arg)
  first = x[tuple(slice(0, 1) if d in axes else slice(None) for d in range(x.ndim))]
  if x.size and not np.array_equal(_bits(np.broadcast_to(first, x.shape)), _bits(x)):
    raise EvalError(f"REPLICATED over axes {list(axes)}: the slices differ, so the value is not replicated", ctx.i, "REPLICATED",
                    rule="replicated-check")
  if any(x.shape[d] == 0 for d in axes):   # no slice to take: the collapsed axis reads as zero (decision pad-fill)
    return np.zeros(tuple(1 if d in axes else n for d, n in enumerate(x.shape)), x.dtype)
  return first


def _bits(x):
  """The bit patterns, so that NaN equals NaN and -0.0 differs from +0.0."""
  return x.view(np.dtype(f"u{x.dtype.itemsize}"))
