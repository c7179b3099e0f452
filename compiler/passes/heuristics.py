"""Hand-coded heuristics: the OptOps a kernel gets by default, per device kind.

The numbers are spec/render.yaml `heuristics` (one entry per device kind, cpu or gpu).
From a kernel's accesses (which ranges each memory access depends on, and with what
stride) they choose, in this order:
  0. GPUs: a fused row kernel (row reductions with the elementwise work reading them,
     compiler/passes/rangeify.py) is a work-group per row: every reduce and the output axis
     split into the same `group_size` lanes (_gpu_rows), and nothing else;
  1. register tiling: when the kernel reduces and an input does not depend on an output
     axis (gemm, convolution: each loaded value is used by many outputs), UPCAST the
     output axis that is contiguous in the store by tile[1] and another such output
     axis by tile[0]; every load in the tile is then read once and used tile-many times.
     A size the tile does not divide is padded to the next multiple (PADTO: the missing
     rows and columns masked) where the table says `pad_tiles`; with `pad_outputs` such a
     tile stores into a padded buffer and reads zero-padded inputs (compiler/passes/layout.py),
     so it is vector code like any other, and C pads the row tiles further to a multiple
     of the THREAD slices where the threads could not share them evenly (at most 1/8
     more rows).
     C: a panel of column tiles (LOCAL, a loop there) goes outside the rows (SWAP) while
     its input fits `panel_bytes`, the reduce is unrolled by `unroll_tile`, and the
     input read across the reduce loop is packed in tile order (compiler/passes/layout.py);
  2. a long reduce with few outputs is split across the cores (C: GROUP_REDUCE on
     threads, top: each reads one contiguous block) or a workgroup's work items
     (OpenCL: `group_size` of them, `group_top` as the table says) and combined
     afterwards; on OpenCL compiler/passes/split.py has already spread it over work-groups.
     GPUs: any reduce whose outputs cannot fill the device gets a work-group per output,
     its work items reading consecutive elements (_gpu_group);
  3. a reduce contiguous in memory gets `unroll_reduce` independent accumulators
     (UNROLL), which the C compiler vectorizes;
  4. elementwise kernels: the output axis contiguous in memory gets vector lanes
     (UPCAST: C by a vector register's elements, GPUs by 4: float4 loads and stores,
     only where the kernel's ops vectorize: scalar copies would read 4 elements apart);
  5. C: THREAD-split the outermost output axis over the cores; GPU: LOCAL-split the
     innermost output axis into workgroups of `local_size`.
Kernels under `min_work` iterations, and kernels whose loops are not one independent
nest (their axes are not GLOBAL), keep their loops; a float MUL reduction keeps its
order (opt.order).
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.props import props
from tinyspec.compiler.analysis.symbolic import linear
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.analysis.axes import ranges, axis_type, size, output_nest, reorderable
from tinyspec.compiler.passes.expand import _vectorizable
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.device import device


def _prod(xs) -> int:
  n = 1
  for x in xs: n *= x
  return n


def accesses(sink: UOp) -> list[tuple[bool, UOp, dict]]:
  """(is_store, PARAM, {range: stride in elements, or None when not linear}) of every
  element access INDEX(PARAM, i...) of the kernel."""
  stores = {u.src[0] for u in toposort(sink) if u.op == "STORE"}
  out = []
  for u in toposort(sink):
    if u.op != "INDEX" or u.src[0].op != "PARAM": continue
    shape = props(u.src[0]).shape
    if len(shape) != len(u.src) - 1: continue
    strides: dict = {}
    step = 1
    for i, d in reversed(list(zip(u.src[1:], shape))):
      lf = linear(i, 16)
      rs = [x for x in toposort(i) if x.op == "RANGE"]
      for r in rs:
        k = lf[0].get(r) if lf is not None else None
        if k is None or (lf is not None and any(t is not r and r in toposort(t) for t in lf[0])): strides[r] = None
        elif strides.get(r, 0) is not None: strides[r] = strides.get(r, 0) + k * step
      step *= d
    out.append((u in stores, u.src[0], strides))
  return out


def _itemsize(sink: UOp) -> int:
  """The widest element the kernel stores (what its vectors hold)."""
  sizes = [_dt(props(u.src[0]).dtype).itemsize for u in toposort(sink) if u.op == "STORE" and u.src[0].op == "INDEX"]
  return max(sizes, default=4)


def _divisor(n: int, want: int, lo: int = 2) -> int | None:
  """The largest divisor of n that is <= want and >= lo."""
  for k in range(min(want, n), lo - 1, -1):
    if n % k == 0: return k
  return None


def _thread_slices(dev, H: dict) -> int:
  """C: how many THREAD slices an output axis is cut into (0: no threads)."""
  if dev.target != "c" or not H.get("threads") or dev.threads <= 1: return 0
  return dev.threads * H.get("slices_per_thread", 1)


def _balanced(n: int, dev, H: dict) -> int | None:
  """The largest divisor of n that is at most the slices wanted and a multiple of the
  threads (every thread gets as many slices), or None."""
  want = _thread_slices(dev, H)
  for k in range(min(want, n), dev.threads - 1, -1):
    if n % k == 0 and k % dev.threads == 0: return k
  return None


class Axes:
  """The kernel's axes as the opts so far leave them: by position (what an opt names),
  each with its size, type and, per access, its stride (inherited from the axis it was
  split from: the inner part keeps the stride, the outer part strides k times as far)."""
  def __init__(self, axes: list[UOp], acc):
    self.size = [size(r) for r in axes]
    self.type = [axis_type(r) for r in axes]
    self.strides = [[a[2].get(r, 0) for r in axes] for a in acc]   # per access, per position (0: independent)
    self.opts: list = []

  def padto(self, p: int, m: int) -> int:
    """PADTO axis p to a multiple of m (the added iterations masked); returns m."""
    self.opts.append(["PADTO", p, m])
    self.size[p] = -(-self.size[p] // m) * m
    return m

  def split(self, p: int, k: int, kind: str, top: bool | None = None) -> int:
    """SPLIT axis p by k into kind; returns the position of the part that keeps p's type."""
    self.opts.append(["SPLIT", p, [k, kind] + ([top] if top is not None else [])])
    n, cur = self.size[p], self.type[p]
    q = len(self.size)
    if top:   # p: the k-sized new part (outer), q: the rest (inner, old type)
      self.size[p], self.type[p] = k, kind
      self.size.append(n // k); self.type.append(cur)
      for st in self.strides:
        s = st[p]
        st.append(s)
        st[p] = None if s is None else s * (n // k)
      return q
    self.size[p] = n // k
    self.size.append(k); self.type.append(kind)
    for st in self.strides:
      s = st[p]
      st.append(s)
      st[p] = None if s is None else s * k
    return p


def _tile_rows(H: dict, dev, vectors_per_row: int) -> int:
  """The register tile's rows: the table's, cut so that rows x vectors per row accumulators
  fit the table's budget for the device's vector width (`tile_accumulators`)."""
  budget = (H.get("tile_accumulators") or {}).get(dev.vector_bytes)
  rows = int(H["tile"][0])
  return max(2, min(rows, int(budget) // max(1, vectors_per_row))) if budget else rows


def _gpu_group(A: Axes, reds: list, out_numel: int, dev, H: dict, contiguous_in_load, apart=lambda p, q: False) -> bool:
  """GPU: a reduce whose outputs are too few to fill the device (fewer than compute units x
  `fill_items`) gets a work-group per output: its axis contiguous in memory split into
  `group_size` work items (GROUP_REDUCE, inner: consecutive items read consecutive
  elements), combined through local memory. A row reduction (softmax, layer norm) is one
  work-group per row; a split reduce's partials (compiler/passes/split.py) one per partial."""
  p = next((p for p in reversed(reds) if contiguous_in_load(p)), None)
  width = min(int(H["group_size"]), dev.max_local or int(H["group_size"]))
  if p is None or out_numel >= dev.threads * int(H["fill_items"]) or A.size[p] < int(H["group_min"]): return False
  g = _divisor(A.size[p], width, max(2, dev.warp))
  if not g: return False
  # the other reduces of a fused row kernel whose outputs are the rows (a logsumexp): as
  # long, contiguous, separate REDUCEs (`apart`): the same lanes, one after the other
  same = [q for q in reds if q == p or (A.size[q] == A.size[p] and contiguous_in_load(q) and apart(p, q))]
  for q in same: reds[reds.index(q)] = A.split(q, g, "GROUP_REDUCE", False)
  return True


def _row_axis(A: Axes, reds: list, outs: list, contiguous_in_load, contiguous_in_store):
  """The output axis of a fused row kernel (row reductions kept with the elementwise work
  that reads them, compiler/passes/rangeify.py _row_fused), or None: the output axis contiguous
  in memory, every reduce as long, read contiguously, and no reduce running inside it
  (what a reduce reads does not move with it: the reduces are per row)."""
  inner = [p for p in outs if contiguous_in_store(p)]
  if not reds or not inner: return None
  n_ax = inner[-1]
  if any(A.size[p] != A.size[n_ax] or not contiguous_in_load(p) for p in reds): return None
  if any(st[n_ax] != 0 for st in A.strides if any(st[p] != 0 for p in reds)): return None
  return n_ax


def _gpu_rows(A: Axes, reds: list, outs: list, dev, H: dict, contiguous_in_load, contiguous_in_store) -> bool:
  """GPU: a fused row kernel (row reductions kept with the elementwise work that reads
  them, compiler/passes/rangeify.py _row_fused): every reduce runs over a row as long as the
  output axis contiguous in memory. All of them are split into the same `group_size`
  lanes, stride 1 (GROUP_REDUCE for each reduce, LOCAL for the output axis, swapped
  outside that axis's remaining loop): render makes the lanes one work-item id, so each
  work-group reads its row coalesced in every pass and the rows are the work-groups."""
  n_ax = _row_axis(A, reds, outs, contiguous_in_load, contiguous_in_store)
  if n_ax is None: return False
  n = A.size[n_ax]
  g = _divisor(n, min(int(H["group_size"]), dev.max_local or int(H["group_size"])), max(2, dev.warp))
  if not g: return False
  for i, p in enumerate(reds): reds[i] = A.split(p, g, "GROUP_REDUCE", False)
  A.split(n_ax, g, "LOCAL", False)
  lane = len(A.size) - 1
  if n // g > 1: A.opts.append(["SWAP", n_ax, lane])
  return True


def _local_tile(A: Axes, H: dict, dev, target: str, m_ax, n_ax, reds: list, padded: bool, outs: list, reused, fits) -> bool:
  """GPU: a register-tiled reduce gets a 2-d work-group (`local_tile` items: LOCAL splits
  of its row and column axes) whose items copy each step's input tiles into local memory
  together (STAGE by `local_tile` k), when the sizes divide and `fits` says the opts apply
  and compile, race-free (else the kernel keeps its global reads: padded tiles, odd shapes)."""
  T = H.get("local_tile")
  if not T or dev.kind != "gpu" or target != "opencl" or padded or m_ax is None: return False
  (ir, ic), k = (int(x) for x in T["items"]), int(T["k"])
  if dev.max_local and ir * ic > dev.max_local: return False
  red = next((p for p in reds if A.size[p] % k == 0 and A.size[p] >= 2 * k), None)   # the reduce axis stepped through
  if A.size[n_ax] % ic or red is None: return False
  if fits is None: return False
  # the rows: the register tile's, else another output axis an input is reused along (a
  # convolution's output channels, along which its windowed input is reused)
  cut = next((n for n in range(len(A.opts) - 1, -1, -1) if A.opts[n][:2] == ["SPLIT", m_ax] and A.opts[n][2][1] == "UPCAST"), None)
  if cut is None: return False     # the rows found no register tile (a prime row count): nothing to stage
  rows = A.opts[cut][2][0]
  for p in [m_ax] + [p for p in reversed(outs) if p not in (m_ax, n_ax) and reused(p)]:
    size_p = A.size[p] if p == m_ax else A.size[p] // rows if A.size[p] % rows == 0 else 0
    if not size_p or size_p % ir: continue
    opts = A.opts[:cut] + [["SPLIT", p, [rows, "UPCAST"]]] + A.opts[cut + 1:]
    trial = opts + [["SPLIT", n_ax, [ic, "LOCAL"]], ["SPLIT", p, [ir, "LOCAL"]], ["STAGE", red, k]]
    if not fits(trial): continue
    A.opts[:] = trial
    return True
  return False


def numbers(dev) -> dict:
  """spec/render.yaml `heuristics` for the device's kind, with its target's own numbers
  (`by_target`) in place of the kind's."""
  H = render_tables()["heuristics"][dev.kind]
  return {**H, **(H.get("by_target") or {}).get(dev.target, {})}


class _Plan:
  """One kernel as default_opts's steps see it: its axes (Axes, with the opts so far),
  the output and reduce axes, the device and its numbers."""
  def __init__(self, sink: UOp, target: str, dev, H: dict, axes: list, outs: list, reds: list, closers: list, acc: list, fits):
    self.sink, self.target, self.dev, self.H, self.axes = sink, target, dev, H, axes
    self.outs, self.reds, self.closers, self.fits = outs, reds, closers, fits
    self.A = Axes(axes, acc)
    self.is_load = [not a[0] for a in acc]
    self.is_store = [a[0] for a in acc]

  def contiguous_in_store(self, p): return any(s and st[p] == 1 for s, st in zip(self.is_store, self.A.strides))
  def contiguous_in_load(self, p): return any(ld and st[p] == 1 for ld, st in zip(self.is_load, self.A.strides))
  def reused(self, p): return any(ld and st[p] == 0 for ld, st in zip(self.is_load, self.A.strides))


def default_opts(sink: UOp, target: str, dev=None, fits=None) -> list:
  """The opts for the kernel (module doc). fits(opts) -> bool: do these opts apply and
  compile (compiler/passes/optimize.py opts_fit)? The staged (local-memory) tiling is offered only
  where the caller can say: without `fits` the kernel keeps its global reads."""
  dev = dev or device(target)
  H = numbers(dev)
  axes = ranges(sink)
  if not axes or any(size(r) is None for r in axes): return []
  if _prod(size(r) for r in axes) < H["min_work"]: return []
  nest = output_nest(sink)
  rset = {r: k for k, r in enumerate(axes)}
  outs = [rset[r] for r in (nest[1] if nest else []) if axis_type(r) == "GLOBAL"]
  closers = [u for u in toposort(sink) if u.op in ("END", "REDUCE")]
  reds = [rset[r] for r in axes if axis_type(r) == "REDUCE" and all(u.op == "REDUCE" and reorderable(u) for u in closers if r in u.src[1:])]
  if not outs and not reds: return []
  P = _Plan(sink, target, dev, H, axes, outs, reds, closers, accesses(sink), fits)
  # 0. a fused row kernel on a GPU: a work-group per row
  if reds and outs and dev.kind == "gpu" and dev.target == "opencl" and _gpu_rows(P.A, reds, outs, dev, H, P.contiguous_in_load, P.contiguous_in_store):
    return P.A.opts
  tiled = bool(reds and outs) and _register_tile(P)
  grouped = _plan_group_reduce(P) if reds and not tiled else False
  _unroll_reduce(P, tiled, grouped)
  _vector_outputs(P)
  _parallel_outputs(P, grouped)
  return P.A.opts


def _register_tile(P: _Plan) -> bool:
  """1. register tiling of a reduce kernel whose inputs are shared between outputs
  (whether it was tiled)."""
  A, H, dev, outs, reds, reused = P.A, P.H, P.dev, P.outs, P.reds, P.reused
  inner = [p for p in outs if P.contiguous_in_store(p) and reused(p)]
  if not inner: return False
  n_ax = inner[-1]
  k = _divisor(A.size[n_ax], H["tile"][1], H["tile"][1])
  padded = False
  if k is None and H.get("pad_tiles") and A.size[n_ax] >= 2 * H["tile"][1]:
    padded = True
    k = A.padto(n_ax, int(H["tile"][1]))     # the last tile's missing columns are masked
  if not k: return False
  # k columns as k/lanes vectors: the vector axis innermost (contiguous), the copies outside it
  item = max(1, _itemsize(P.sink))
  lanes = max(1, min(k, dev.vector_bytes // item))
  A.split(n_ax, lanes, "UPCAST")
  if k // lanes > 1: A.split(n_ax, k // lanes, "UPCAST")
  rows = _tile_rows(H, dev, k // lanes)
  m_ax = next((p for p in reversed(outs) if p != n_ax and reused(p) and A.size[p] >= 2 * rows), None)
  if m_ax is not None:
    r = _divisor(A.size[m_ax], rows, 2)
    if H.get("pad_tiles") and (r is None or 2 * r <= rows): r, padded = A.padto(m_ax, rows), True   # no near divisor: masked rows
    T = _thread_slices(dev, H)
    if T and H.get("pad_outputs") and r and _balanced(A.size[m_ax] // r, dev, H) is None:
      # the row tiles cannot be shared evenly by the threads: pad them to a multiple of
      # the slices (padded tiles cost little where they store into a padded buffer)
      m = A.size[m_ax]
      if -(-m // (r * T)) * r * T - m <= m // 8: r, padded = rows, True; A.padto(m_ax, rows * T)
    if r: A.split(m_ax, r, "UPCAST")
  # a panel of column tiles shares each pass over the rows (C: LOCAL is a loop)
  red_len = _prod(A.size[p] for p in reds)
  panel = H.get("panel_bytes", 0) // max(1, red_len * k * item)
  # (a padded tile that keeps its masked accesses -- no `pad_outputs` -- does not
  #  vectorize: the panel and the unrolled reduce measured 4-6x slower on it, gemm
  #  1000, so it keeps the plain loop)
  masked = padded and not H.get("pad_outputs")
  L = _divisor(A.size[n_ax], panel, 2) if dev.target == "c" and panel >= 2 and m_ax is not None and not masked else None
  if L:
    A.split(n_ax, L, "LOCAL")
    A.opts.append(["SWAP", m_ax, n_ax])
  staged = _local_tile(A, H, dev, P.target, m_ax, n_ax, reds, padded, outs, reused, P.fits)
  # OpenCL on a CPU runs a work-group's items one after another on one core: items
  # along the row tiles share one column panel of B while it is in cache
  g = H.get("tile_group")
  if g and not staged and dev.target == "opencl" and dev.kind == "cpu" and m_ax is not None:
    g = _divisor(A.size[m_ax], g, 2)
    if g: A.split(m_ax, g, "LOCAL")
  u = H.get("unroll_tile", 1)
  if u > 1 and not staged and not masked and len(reds) == 1 and A.size[reds[0]] % u == 0 and A.size[reds[0]] >= 4 * u: A.split(reds[0], u, "UNROLL")
  return True


def _plan_group_reduce(P: _Plan) -> bool:
  """2. a long reduce with few outputs: split it across the cores / a workgroup (whether it was)."""
  A, H, dev, reds = P.A, P.H, P.dev, P.reds
  out_numel = _prod(A.size[p] for p in P.outs)
  red_numel = _prod(A.size[p] for p in reds)
  if dev.kind == "gpu" and dev.target == "opencl":
    def apart(p, q): return not any(u.op == "REDUCE" and P.axes[p] in u.src[1:] and P.axes[q] in u.src[1:] for u in P.closers)
    return _gpu_group(A, reds, out_numel, dev, H, P.contiguous_in_load, apart)
  if not (out_numel <= H["few_outputs"] and red_numel >= H["group_reduce"]): return False
  p = reds[0]
  if dev.target == "c" and H.get("threads"):
    g = _divisor(A.size[p], dev.threads * H.get("slices_per_thread", 1), 2)
    if g and dev.threads > 1:
      reds[0] = A.split(p, g, "GROUP_REDUCE", True)
      return True
  elif dev.target == "opencl" and H.get("group_size"):
    g = _divisor(A.size[p], min(H["group_size"], dev.max_local or H["group_size"]), 2)
    if g:
      reds[0] = A.split(p, g, "GROUP_REDUCE", bool(H.get("group_top")))
      return True
  return False


def _unroll_reduce(P: _Plan, tiled: bool, grouped: bool) -> None:
  """3. independent accumulators for a reduce contiguous in memory; in an OpenCL group
  only for the ops the table lists (`group_unroll`: a float ADD chain is bound by the
  add's latency; the integer MAX a float MAX becomes measured slower unrolled)."""
  A, H = P.A, P.H
  unroll = H["unroll_reduce"]
  if grouped and P.dev.target == "opencl":
    gu = H.get("group_unroll") or {}
    unroll = min((gu.get(u.arg["op"], 0) for u in P.closers if u.op == "REDUCE"), default=0)
  if P.reds and not tiled and unroll > 1:
    p = P.reds[-1]
    if P.contiguous_in_load(p):
      k = _divisor(A.size[p], unroll, 2)
      if k and A.size[p] // k >= 2: A.split(p, k, "UNROLL")


def _vector_outputs(P: _Plan) -> None:
  """4. vector lanes along a contiguous output axis (explicit vector loads and stores)."""
  A, dev = P.A, P.dev
  want = (P.H.get("vector_outputs") or {}).get(dev.target)
  if not (P.outs and not P.reds and want): return
  inner = [p for p in P.outs if P.contiguous_in_store(p)]
  lanes = max(1, dev.vector_bytes // max(1, _itemsize(P.sink))) if want == "register" else int(want)
  # a GPU reads a scalar copy of each lane `lanes` elements apart (uncoalesced): lanes only where they become vectors
  whole = dev.kind != "gpu" or _vectorizable(P.sink, P.axes[inner[-1]]) if inner else False
  if inner and whole and lanes > 1 and A.size[inner[-1]] % lanes == 0 and A.size[inner[-1]] >= 4 * lanes:
    A.split(inner[-1], lanes, "UPCAST")


def _parallel_outputs(P: _Plan, grouped: bool) -> None:
  """5. parallel output axes: THREAD slices on C, LOCAL work-groups on OpenCL."""
  A, H, dev, outs = P.A, P.H, P.dev, P.outs
  if not outs: return
  if dev.target == "c" and H.get("threads") and dev.threads > 1:
    want = _thread_slices(dev, H)
    for p in (p for p in outs if A.size[p] >= want):     # the outermost that splits (31 column tiles do not)
      t = _balanced(A.size[p], dev, H) or _divisor(A.size[p], want, 2)
      if t:
        A.split(p, t, "THREAD", True)
        break
  elif dev.target == "opencl" and H.get("locals") and not grouped and not any(o[0] == "STAGE" for o in A.opts):
    p = outs[-1]
    k = _divisor(A.size[p], min(H["local_size"], dev.max_local or H["local_size"]), 2)
    if k: A.split(p, k, "LOCAL")
