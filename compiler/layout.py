"""Packing: an input a tiled kernel reads across its reduce loop is first copied into
the order that loop reads it in.

A register-tiled gemm reads B[k, n0 .. n0+W) -- W contiguous columns, its vector lanes
and UPCAST copies -- once per step of the reduce loop k, so consecutive steps are a row
(N elements) apart: every step touches a new cache line and, for wide rows, a new page.
Copying B once into Bp[n / W, k, n % W] makes the W columns of every k one contiguous run
and the whole tile's reads one sequential stream. The copy is a kernel of its own,
scheduled just before (an O(K*N) pass against the O(M*K*N) product it feeds).

A read is packed when (render.yaml `heuristics`, `pack`):
  * it is INDEX(PARAM, k, n) of a 2-d PARAM the kernel does not write, with at least
    `pack_min` elements;
  * the UPCAST ranges in n form one contiguous block of W >= the device's vector lanes
    elements (their coefficients 1, s0, s0*s1...) and W divides N;
  * a REDUCE range steps through k (a stride of N elements, more than W).
The kernel then reads INDEX(Bp, n // W, k, n % W), which the simplifier turns back into
the tile's own ranges.
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.compiler.props import props, const, shape_operand
from tinyspec.compiler.rewrite import toposort, substitute
from tinyspec.compiler.schedule import Kernel, Schedule
from tinyspec.compiler.symbolic import linear, simplify
from tinyspec.compiler.heuristics import numbers
from tinyspec.compiler.axes import axis_type, size
from tinyspec.compiler.optimize import initial_types, apply_opts


def _lane_block(i: UOp) -> int | None:
  """W when the UPCAST ranges of index expression i form a contiguous block of W, else None."""
  lf = linear(i, 32)
  if lf is None: return None
  ups = sorted(((k, t) for t, k in lf[0].items() if t.op == "RANGE" and axis_type(t) == "UPCAST"), key=lambda x: x[0])
  if not ups: return None
  w = 1
  for k, t in ups:
    if k != w or size(t) is None: return None
    w *= size(t)
  return w


def _reduce_stride(i: UOp) -> bool:
  lf = linear(i, 32)
  return lf is not None and any(t.op == "RANGE" and axis_type(t) == "REDUCE" for t in lf[0])


def candidates(sink: UOp, min_elems: int, lanes: int) -> list[tuple[UOp, int]]:
  """(INDEX, W) of the reads worth packing (see the module doc)."""
  written = set()
  for u in toposort(sink):
    if u.op == "STORE":
      t = u.src[0]
      while t.op in ("INDEX", "AFTER"): t = t.src[0]
      written.add(t)
  out = []
  for u in toposort(sink):
    if u.op != "INDEX" or u.src[0].op != "PARAM" or u.src[0] in written or len(u.src) != 3: continue
    K, N = props(u.src[0]).shape
    if K * N < min_elems: continue
    w = _lane_block(u.src[2])
    if w is None or w < lanes or N % w or w >= N: continue
    if _lane_block(u.src[1]) is not None or not _reduce_stride(u.src[1]): continue
    out.append((u, w))
  return out


def _pack_kernel(src_shape, w: int, dtype: str, name: str) -> UOp:
  """Bp[a, k, j] = B[k, a*w + j]."""
  K, N = src_shape
  out = UOp("PARAM", (shape_operand((N // w, K, w)),), {"slot": 0, "dtype": dtype})
  inp = UOp("PARAM", (shape_operand((K, N)),), {"slot": 1, "dtype": dtype})
  a, k, j = (UOp("RANGE", (const(n, "index"),), {"id": i, "type": "LOOP"}) for i, n in enumerate((N // w, K, w)))
  col = UOp("ADD", (UOp("MUL", (a, const(w, "index"))), j))
  st = UOp("STORE", (UOp("INDEX", (out, a, k, j)), UOp("INDEX", (inp, k, col))))
  return UOp("SINK", (UOp("END", (st, a, k, j)),), {"name": name})


def pack(sched: Schedule, target: str, dev) -> Schedule:
  """Insert the packing kernels the schedule's kernels want (kernels already optimized)."""
  from tinyspec.compiler.rangeify import _prune_params
  from tinyspec.compiler.heuristics import default_opts
  H = numbers(dev)
  if not H.get("pack"): return sched
  kernels: list[Kernel] = []
  inter = set(sched.intermediates)
  slot = sched.free_slot()
  for k in sched.kernels:
    if k.sink.op != "SINK": kernels.append(k); continue
    lanes = max(1, dev.vector_bytes // 4)
    found = candidates(k.sink, H["pack_min"], lanes)
    if not found: kernels.append(k); continue
    sink, args, subs = k.sink, list(k.args), {}
    for n, (idx, w) in enumerate(found):
      p = idx.src[0]
      pr = props(p)
      Kd, Nd = pr.shape
      buf = UOp("BUFFER", (shape_operand((Nd // w, Kd, w)),), {"slot": slot, "dtype": pr.dtype, "device": dev_name(args[p.arg["slot"]])})
      slot += 1
      inter.add(buf)
      psink = initial_types(_pack_kernel((Kd, Nd), w, pr.dtype, f"pack_{Kd}_{Nd}"))
      psink = apply_opts(psink, default_opts(psink, target, dev), target, dev)
      kernels.append(Kernel(psink, [buf, args[p.arg["slot"]]], {0}, f"{k.name}_pack{n}"))
      q = UOp("PARAM", (shape_operand((Nd // w, Kd, w)),), {"slot": len(args), "dtype": pr.dtype})
      args.append(buf)
      i_k, i_n = idx.src[1], idx.src[2]
      subs[idx] = UOp("INDEX", (q, UOp("IDIV", (i_n, const(w, "index"))), i_k, UOp("MOD", (i_n, const(w, "index")))))
    sink = simplify(substitute(sink, subs))
    sink, args, writes = _prune_params(sink, args, set(k.writes))
    kernels.append(Kernel(sink, args, writes, k.name))
  return Schedule(kernels, sched.outputs, inter, dict(sched.meta))


def dev_name(storage: UOp):
  while storage.op == "BUFFER_VIEW": storage = storage.src[0]
  d = props(storage).device
  return d if isinstance(d, str) else "CPU"
