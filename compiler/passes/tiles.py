"""The STAGE OptOp: a gemm-shaped reduce reads its inputs through local memory.

    ["STAGE", axis, k]     axis: a REDUCE's own axis; k divides it

The reduce axis is split into (steps, k) (both REDUCE). Every load of the reduce's value
that depends on the inner k-range is *staged*: per step, the work-group's work items
copy the tile of that input the whole group reads in the step -- its elements for every
value of the group's LOCAL axes, the UPCAST axes and the k-range -- from global memory into
a LOCAL buffer, a BARRIER, and the reduce reads the tile there:

    tile  = BUFFER (R0*R1,), addrspace LOCAL           R0 x R1: the tile's rows x columns
    END(STORE(INDEX(tile, t0*R1 + t1), X[base + (t0, t1)]), j)     j: copies (UPCAST), if any
    bar   = BARRIER(GROUP(the stores of every staged input))
    value = ... INDEX(AFTER(tile, bar), f0*R1 + f1) ...                f: the compute's own offsets

The copy is coalesced by construction: the innermost work-item axis (the last LOCAL axis of
the output nest, get_local_id(0)) walks the tile's columns, t1 = lid0 (*W + lane, W the
compute's vector lanes when the columns are lid0 x W wide), the other work-item axis and j
its rows, t0 = j*|lid1| + lid1. An input whose tile does not split so (its global offsets
are not a dense mixed-radix number of those axes, it depends on another loop, the tile
exceeds local memory) refuses the opt (opt.unsupported): the kernel keeps global reads.
expand ends each step with a second BARRIER (the next step's copies overwrite what this
step reads: compiler/passes/expand.py `step_barrier`) and proves the result race-free with
compiler/analysis/parallel.py `hazards` (compiler/passes/expand.py `race_free`).
"""
from __future__ import annotations
import numpy as np
from tinyspec.uop import UOp, toposort
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.compiler.errors import CompileError, REFUSED
from tinyspec.rewrite import substitute
from tinyspec.compiler.analysis.symbolic import simplify, linear
from tinyspec.compiler.analysis.axes import axis_type, size, closers, top_nest, reorderable
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.analysis.localbanks import warp_items, ways, banks
from tinyspec.compiler.analysis.localrace import _eval


def _add(*xs: UOp) -> UOp:
  out = xs[0]
  for x in xs[1:]: out = UOp("ADD", (out, x))
  return out


def _mul(x: UOp, k: int) -> UOp: return x if k == 1 else UOp("MUL", (x, const(k, "index")))


def _refuse(why: str):
  raise CompileError("opt.unsupported", f"STAGE: {why}")


def _tile_part(i: UOp, tile: set):
  """(base, [(range, coef)...], extent) of index i: its terms over the tile's ranges as
  a dense mixed-radix number 0..extent-1 (coefficients 1, s1, s1*s2...), base the rest."""
  lf = linear(i, 32)
  if lf is None: _refuse("an input index that is not linear")
  terms, c = lf
  part = sorted(((t, k) for t, k in terms.items() if t in tile), key=lambda tk: tk[1])
  if any(t not in tile and any(x in tile for x in toposort(t)) for t in terms): _refuse("an input index mixes the tile's axes non-linearly")
  ext = 1
  for t, k in part:
    if k != ext: _refuse("an input's tile is not dense in memory")
    ext *= size(t)
  base = _add(const(c, "index"), *[_mul(t, k) for t, k in terms.items() if t not in tile])
  return base, part, ext


class _Skip(Exception):
  """An input whose tile cannot be copied so: it keeps its global reads."""


def _copy_plan(x: UOp, tile: set, upcast: set, lid0: UOp, lid1, fresh: int):
  """How the work items copy input x's tile (see the module doc): (tile buffer, t0, t1,
  copies range j or None, R0, R1, the rows' and columns' dimensions, each dimension's
  (base, tile terms, extent)); _Skip when it cannot be copied coalesced."""
  if any(t.op == "RANGE" and t not in tile and axis_type(t) not in ("GLOBAL", "REDUCE") for t in toposort(x)): raise _Skip("an input depends on a loop other than the group's")
  try: parts = [_tile_part(i, tile) for i in x.src[1:]]
  except REFUSED as e: raise _Skip(str(e)) from None
  used = [t for _, p, _ in parts for t, _ in p]
  if len(used) != len(set(used)): raise _Skip("an axis appears in two dimensions of an input")
  dims = [d for d, (_, p, e) in enumerate(parts) if e > 1]
  if not dims or len(dims) > 2: raise _Skip("an input's tile is not two-dimensional")
  cols = dims[-1]
  rows = dims[0] if len(dims) == 2 else None
  if any(d != 1 for d in props(x.src[0]).shape[cols + 1:]): raise _Skip("an input's tile rows are not contiguous in memory (the copy would not coalesce)")
  R1, R0 = parts[cols][2], (parts[rows][2] if rows is not None else 1)
  # the copy: lid0 (x W lanes) along the columns, lid1 and copies j along the rows
  if R1 == size(lid0): t1 = lid0
  else:
    lane = next((t for t, c in parts[cols][1] if c == 1 and t in upcast and size(t) * size(lid0) == R1), None)
    if lane is None: raise _Skip(f"a tile {R1} columns wide does not match {size(lid0)} work items")
    t1 = _add(_mul(lid0, size(lane)), lane)
  h = size(lid1) if lid1 is not None else 1
  if R0 % h: raise _Skip(f"a tile of {R0} rows does not split over {h} work items")
  j = UOp("RANGE", (const(R0 // h, "index"),), {"id": fresh, "type": "UPCAST"}) if R0 // h > 1 else None
  t0 = _add(*([_mul(j, h)] if j is not None else []), *([lid1] if lid1 is not None else [const(0, "index")]))
  buf = UOp("BUFFER", (shape_operand((R0 * R1,)),), {"slot": 0, "dtype": props(x.src[0]).dtype, "device": "REG", "addrspace": "LOCAL"})
  return buf, t0, t1, j, R0, R1, rows, cols, parts


def _pitch(t0, t1, j, f, R1: int, lid0, lid1, kin, upcast: set, col_terms, itemsize: int, dev) -> int:
  """The row pitch of a tile R1 columns wide: R1, or wider where that costs a warp fewer
  passes through the banks of local memory (compiler/analysis/localbanks.py). A warp's copy writes
  rows t0 at columns t1; the multiply loop reads rows f[0] at columns f[1], k times per
  copy for each of its non-vector UPCAST copies, so the reads weigh more. A tile read as
  vectors keeps pitches of whole vectors (aligned vector loads)."""
  warp = dev.warp if dev is not None else 1
  if warp <= 1: return R1
  items = warp_items([size(lid0), size(lid1) if lid1 is not None else 1], warp)
  lane = next((t for t, c in col_terms if c == 1 and t in upcast), None)   # the columns' vector lanes
  W = size(lane) if lane is not None else 1
  env = {lid0: items[:, 0][:, None]}
  if lid1 is not None: env[lid1] = items[:, 1][:, None]
  if lane is not None: env[lane] = np.arange(W, dtype=np.int64)[None, :]
  def cost(P):
    def passes(i):
      e = dict(env)
      for x in toposort(i):
        if x.op == "RANGE" and x not in e: e[x] = np.int64(0)   # the other copies and loops: every lane alike
      return ways(np.broadcast_to(_eval(i, e, {}), (len(items), W)), itemsize)
    reads = size(kin) * _prod(size(t) for t in upcast if t is not lane and t in toposort(f[0]))
    return reads * passes(simplify(_add(_mul(f[0], P), f[1]))) + (size(j) if j is not None else 1) * passes(simplify(_add(_mul(t0, P), t1)))
  nb, _ = banks()
  return min(range(R1, R1 + nb + 1, W), key=lambda P: (cost(P), P))


def _prod(xs) -> int:
  n = 1
  for x in xs: n *= x
  return n


def stage_tiles(sink: UOp, r: UOp, k: int, next_id: int, split, target: str, dev) -> UOp:
  """The STAGE opt on reduce axis r (see the module doc). `split`: optimize's _split."""
  if target != "opencl": _refuse("local memory shared by work items needs the opencl target (C runs work items one after another)")
  cl = closers(sink, r)
  if not cl or any(u.op != "REDUCE" for u in cl) or len(cl) != 1: _refuse("the axis is not one REDUCE's own axis")
  n = size(r)
  if n is None or not isinstance(k, int) or isinstance(k, bool) or k < 2 or n % k: _refuse(f"{k!r} does not divide the axis ({n})")
  nest = top_nest(sink)
  locs = [x for x in (nest[1] if nest else []) if axis_type(x) == "LOCAL"]
  if not 1 <= len(locs) <= 2: _refuse("the kernel needs one or two LOCAL (work-item) axes")
  lid0, lid1 = locs[-1], (locs[0] if len(locs) == 2 else None)
  sink = split(sink, r, k, "REDUCE", False, next_id)
  kin = next(x for x in toposort(sink) if x.op == "RANGE" and x.arg["id"] == next_id)
  red = next(u for u in toposort(sink) if u.op == "REDUCE" and kin in u.src[1:])
  if not reorderable(red): _refuse("the reduce keeps its order (ops.yaml decision reduce-empty); staging puts the steps innermost")
  upcast = {x for x in toposort(red.src[0]) if x.op == "RANGE" and axis_type(x) == "UPCAST"}
  tile = set(locs) | upcast | {kin}
  loads = [u for u in toposort(red.src[0]) if u.op == "INDEX" and u.src[0].op == "PARAM" and kin in toposort(u)]
  if not loads: _refuse("no input depends on the reduce axis")
  fresh = next_id + 1
  slots = [u.arg["slot"] for u in toposort(sink) if u.op == "BUFFER" and props(u).addrspace == "LOCAL"]
  slot = max(slots, default=-1) + 1
  stores, reads, total, skipped = [], {}, 0, []
  for x in loads:
    try: plan = _copy_plan(x, tile, upcast, lid0, lid1, fresh)
    except _Skip as e: skipped.append(str(e)); continue
    buf, t0, t1, j, R0, R1, rows, cols, parts = plan
    if j is not None: fresh += 1
    dt = props(x.src[0]).dtype
    total += R0 * R1 * _dt(dt).itemsize
    idx = []
    for d, (base, _, _) in enumerate(parts):
      idx.append(simplify(_add(base, t0)) if d == rows else simplify(_add(base, t1)) if d == cols else simplify(base))
    f = [_add(const(0, "index"), *[_mul(t, c) for t, c in parts[d][1]]) for d in (rows, cols) if d is not None]
    P = _pitch(t0, t1, j, f, R1, lid0, lid1, kin, upcast, parts[cols][1], _dt(dt).itemsize, dev) if rows is not None else R1
    total += R0 * (P - R1) * _dt(dt).itemsize
    buf = buf.replace(src=(shape_operand((R0 * P,)),), arg={**buf.arg, "slot": slot}); slot += 1
    st = UOp("STORE", (UOp("INDEX", (buf, simplify(_add(_mul(t0, P), t1)))), x.replace(src=(x.src[0], *idx))))
    stores.append(UOp("END", (st, j)) if j is not None else st)
    reads[x] = (buf, simplify(_add(_mul(f[0], P), f[1])) if rows is not None else simplify(f[0]))
  if not stores: _refuse(skipped[0])
  if dev is not None and dev.local_mem and total > dev.local_mem: _refuse(f"tiles of {total} bytes exceed the {dev.local_mem} of local memory")
  bar = UOp("BARRIER", (stores[0] if len(stores) == 1 else UOp("GROUP", tuple(stores)),))
  subs = {x: UOp("INDEX", (UOp("AFTER", (buf, bar)), i)) for x, (buf, i) in reads.items()}
  # the steps innermost among the reduce's loops (ADD may reorder: decision reduce-empty),
  # so that a copy depending on the others (a convolution's window) runs once per step
  kout = next(x for x in red.src[1:] if x.arg["id"] == r.arg["id"])
  order = [x for x in red.src[1:] if x not in (kout, kin)] + [kout, kin]
  return substitute(sink, {red: red.replace(src=(substitute(red.src[0], subs), *order))})
