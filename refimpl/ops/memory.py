"""LOAD, STORE, ATOMICADD, AFTER, GROUP, SINK and the marker ops: reads, writes and
their order. The storage model (versions, last-write-wins scatter) is refimpl/storage.py;
these units only hand the node to the scope."""
from __future__ import annotations
import numpy as np
from tinyspec.refimpl.unit import unit


@unit("LOAD", raw=True, role="gated_load", alloc=0)
def load(ctx):
  """A read into a new buffer (on another device or addrspace: same data). With a gate:
  buf where the gate is true, else alt; buf is not read where the gate is false."""
  buf = ctx.value(0)
  if len(ctx.node.src) < 3: return buf
  alt, gate = ctx.value(1), ctx.value(2)
  gate = ctx.s.check_gated_read(ctx.i, ctx.node.src[0], gate)
  return np.where(gate.reshape(gate.shape + (1,) * (buf.ndim - gate.ndim)), buf, alt)


@unit("STORE", raw=True, role="store", alloc=0)
def store(ctx): return ctx.s.store(ctx, "set")


@unit("ATOMICADD", raw=True, role="store", alloc=0)
def atomicadd(ctx): return ctx.s.store(ctx, "add")


@unit("AFTER", raw=True, role="after", alloc=0)
def after(ctx): return ctx.s.after(ctx)


@unit("GROUP", raw=True, role="effect", alloc=0)
def effect(ctx):
  """Void: the effects of the sources, merged (the scope does that for every node)."""
  return None


@unit("SINK", "LINEAR", "PROGRAM", "SOURCE", raw=True, role="sink", alloc=0)
def sink(ctx):
  """Void: the end of a kernel (or program): every loop has run; effects merged."""
  return None


@unit(category="marker", role="through", alloc=0)
def marker(ctx, x): return x   # identity on data (and a link in a storage chain)
