"""Kernel ops: loops (RANGE, SPECIAL, END), IF/ENDIF, BARRIER, WMMA.

A RANGE or SPECIAL is an array axis: its value is arange(bound) along that axis (see
refimpl/loops.py for loops that carry a dependency through storage). END closes loops;
the writes inside them then count for every iteration. SPECIAL is a thread index: gidx,
lidx and tidx axes are parallel, and a BARRIER makes the stores of every local thread
(lidx) visible to the reads ordered after it."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit
from tinyspec.refimpl.numeric import NP


@unit("RANGE", "SPECIAL", raw=True, role="loop")
def loop(ctx): return ctx.s.loop_axis(ctx.i, ctx.value(0))


@unit("END", raw=True, role="close", alloc=0)
def end(ctx): return ctx.s.end(ctx)


@unit("BARRIER", raw=True, role="barrier", alloc=0)
def barrier(ctx): return None


@unit("IF", raw=True, role="if", alloc=0)
def if_(ctx):
  ctx.s.open_if(ctx.i, ctx.value(0))
  return None


@unit("ENDIF", raw=True, role="endif", alloc=0)
def endif(ctx): return None


@unit("WMMA")
def wmma(ctx, a, b, acc):
  """acc + A @ B with the products and sums in acc's dtype."""
  t = NP[ctx.dtype]
  return (acc + np.matmul(a.astype(t), b.astype(t))).astype(t)
