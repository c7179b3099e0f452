"""Loops that carry a dependency through storage, evaluated without giving up vectorization
(refimpl/carried.py finds them; refimpl/interpreter.py is what they must compute).

A kernel is evaluated with every RANGE as an array axis: all iterations at once. That is
exact as long as no iteration reads what an earlier iteration of the same loop wrote, which
a kernel says only through an AFTER listing the loop (a *carried* loop). One is evaluated in
one of two ways:

1. Accumulation (the common case, see carried.py): the value after each point is the reduce
   op folded over the contributions of every point so far, from the value before the loop:
   one `ufunc.accumulate` over the contributions in iteration order (each point's in the
   order its chain applies them), in the dtype -- bit for bit what the sequential loop
   computes (float rounding included; a gated-off point contributes the identity, which
   keeps every value). The reads and updates inside the loop get the exclusive and
   inclusive scans (only computed when tracing); the store writes the final value once.
   An AFTER listing several RANGEs carries all of them: their points are flattened in
   iteration order (lexicographic, outer loop first) into one axis for the accumulate.

2. Anything else (`acc = acc*2 + x`, a read elsewhere in the buffer, a store at a
   varying place): the loop is *stepped*, one iteration at a time, while every other
   loop stays an array axis. Axis r has size 1 during an iteration and the RANGE holds
   t; each carried AFTER reads a snapshot of the storage after iteration t-1. The writes
   of all iterations are then concatenated along r, which is exactly the vectorized
   write of the whole loop, so everything after the END sees what it would have.
   Several carried loops closed by one END run their points in iteration order; a
   carried loop nested in another (its own END inside the outer body) starts each run
   from the outer loop's snapshot. A bound that varies over outer loops runs to the
   largest one, each point's stores gated to its own iterations.
"""
from __future__ import annotations
import itertools
import numpy as np
from tinyspec.tables import tables
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import role
from tinyspec.refimpl.numeric import NP, CLS, NATIVE_FLOATS, SATURATING, VIA_F32, canonical_nan, float_op, broadcast_shape
from tinyspec.refimpl.storage import Write, Version, snapshot, merge_effects
from tinyspec.refimpl.ops.reduce import identity


# ------------------------------------------------------------------ accumulation at runtime
def reduction_write(scope, s, path, gate) -> Write:
  """The write of an accumulation store: the value after the last point of its loops."""
  spec = scope.plan.reductions[s]
  m, plan = scope.m, scope.plan
  dims = [plan.axis_of[r] for r in spec.ranges]
  sizes = [scope.loop_sizes[d] for d in dims]
  dt = m.views[spec.update].dtype
  rank = len(m.views[spec.update].shape)
  start = scope.align(scope.values[spec.read], rank)
  xs = []
  for link in spec.links:
    srcs = [scope.align(scope.values[j], rank) for j in link.srcs]
    x = scope.align(np.asarray(link.fn(dt, *srcs) if link.fn else srcs[0]), rank)
    xs.append(scope.full_along(spec.ranges, x)[0])
  valid = scope.loop_validity(spec.ranges)
  g = gate if valid is None else (valid if gate is None else gate & valid)
  on = None
  if g is not None:
    gs = [g.reshape(g.shape + (1,) * (x.ndim - g.ndim)) for x in xs]
    on = [np.broadcast_to(gb, broadcast_shape(gb.shape, x.shape)) for gb, x in zip(gs, xs)]
    xs = [np.where(o, x, masked(spec.op, dt)) for o, x in zip(on, xs)]
  if m.tracing:   # every partial result, for the trace
    seq = accumulate(spec.op, dt, start, xs, dims, spec.acc_first, on)   # (N*L + 1, rest...): N points, L steps each
    if tables().ops[spec.op].nan == "canonical": seq = canonical_nan(seq, dt)
    L = len(spec.links)
    m.record(scope, spec.read, _unflatten(seq[:-1:L], dims, sizes))
    for k, link in enumerate(spec.links): m.record(scope, link.node, _unflatten(seq[k + 1::L], dims, sizes))
    last = seq[-1]
  else:
    last = fold(spec.op, dt, start, xs, dims, spec.acc_first, on)
    if tables().ops[spec.op].nan == "canonical": last = canonical_nan(last, dt)
  return Write(s, [(k, dd) for k, dd, _ in path], np.expand_dims(last, tuple(dims)), None)


def masked(op, dt):
  """What a gated-off point contributes: an identity that keeps every value, -0.0 included."""
  if op == "ADD" and CLS[dt] == "float": return np.asarray(-0.0).astype(identity(op, dt).dtype)
  return identity(op, dt)


def accumulate(op, dt, start, xs, dims, acc_first=True, on=None):
  """[start, OP(start, c0), OP(OP(start, c0), c1), ...] over the contributions c: for each
  point of the loop axes `dims` (ascending) in iteration order (lexicographic), the arrays
  of `xs` in order; in the dtype. An array of shape (N*len(xs) + 1, rest...) where rest is
  the shape without `dims`. acc_first: the accumulator is OP's first operand (MAX is not
  symmetric: decision max-nan); `on` (like xs, or None) says which steps run at all.
  (Computed with the sequence as the last, contiguous axis: ufunc.accumulate walks it in
  order either way, and faster so.)"""
  k = len(dims)
  start = start[tuple(slice(0, 1) if d in dims else slice(None) for d in range(start.ndim))]   # the value before the loops
  start = np.moveaxis(start, dims, tuple(range(k)))
  rest = broadcast_shape(start.shape[k:], *(np.moveaxis(x, dims, tuple(range(k))).shape[k:] for x in xs))
  start = np.broadcast_to(start.reshape(start.shape[k:] + (1,)), rest + (1,))
  seq = np.concatenate([start, _in_order(xs, dims, rest)], axis=-1)   # (rest..., N*L + 1)
  if dt in SATURATING and op in ("ADD", "MUL"): return np.moveaxis(_saturating_accumulate(np.add if op == "ADD" else np.multiply, dt, seq), -1, 0)
  if op == "ADD": return np.moveaxis(np.add.accumulate(seq, axis=-1, dtype=seq.dtype), -1, 0)
  if op == "MUL": return np.moveaxis(np.multiply.accumulate(seq, axis=-1, dtype=seq.dtype), -1, 0)
  if not (seq.dtype.kind == "f" or dt in VIA_F32): return np.moveaxis(np.maximum.accumulate(seq, axis=-1), -1, 0)
  return _max_fold(np.moveaxis(seq, -1, 0), dt, acc_first, None if on is None else np.moveaxis(_in_order(on, dims, rest), -1, 0))


def _saturating_accumulate(fn, dt, seq):
  """fn.accumulate along the last axis, each step rounded and saturated (decision
  fp8-convert), which ml_dtypes' own float8 arithmetic does not do."""
  out = np.empty_like(seq)
  out[..., 0] = seq[..., 0]
  for t in range(1, seq.shape[-1]): out[..., t] = float_op(fn, dt, out[..., t - 1], seq[..., t])
  return out


def fold(op, dt, start, xs, dims, acc_first=True, on=None):
  """accumulate()'s last element alone. A float sum or product is folded in order (the
  accumulate); the ops whose result no order changes (integer ADD/MUL wrap, integer MAX)
  and MAX with the accumulator first (the largest non-NaN element, a NaN start kept, of
  equal zeros the first met) are reduced."""
  floating = np.dtype(NP[dt]).kind == "f" or dt in VIA_F32
  if op != "MAX" and dt in NATIVE_FLOATS:
    last = _fold_rows(op, start, xs, dims)
    if last is not None: return last
  if (op != "MAX" and floating) or (op == "MAX" and floating and not acc_first):
    return accumulate(op, dt, start, xs, dims, acc_first, on)[-1]
  k = len(dims)
  start = start[tuple(slice(0, 1) if d in dims else slice(None) for d in range(start.ndim))]
  start = np.moveaxis(start, dims, tuple(range(k)))
  rest = broadcast_shape(start.shape[k:], *(np.moveaxis(x, dims, tuple(range(k))).shape[k:] for x in xs))
  seq = np.concatenate([np.broadcast_to(start.reshape(start.shape[k:] + (1,)), rest + (1,)), _in_order(xs, dims, rest)], axis=-1)
  if op == "ADD": return np.add.reduce(seq, axis=-1, dtype=seq.dtype)
  if op == "MUL": return np.multiply.reduce(seq, axis=-1, dtype=seq.dtype)
  if not floating: return np.maximum.reduce(seq, axis=-1)
  f = seq.astype(np.float32) if dt in VIA_F32 else seq
  r = np.fmax.reduce(f, axis=-1)   # NaN skipped ...
  r = np.where(np.isnan(f[..., 0]), f[..., 0], r)   # ... but a NaN start stays
  zero = f == 0
  if zero.any():   # a zero result: the sign of the first zero met
    first = np.argmax(zero, axis=-1)
    sign = np.take_along_axis(np.signbit(f), first[..., None], axis=-1)[..., 0]
    r = np.where(r == 0, np.where(sign, -np.zeros((), f.dtype), np.zeros((), f.dtype)), r)
  return r.astype(seq.dtype) if dt in VIA_F32 else r


def _fold_rows(op, start, xs, dims):
  """A float sum or product folded in order, as one reduce over the first axis of a
  C-contiguous (steps, M) array: NumPy adds row after row there (its pairwise summation is
  only for the fast axis), so each of the M columns is folded sequentially -- the bits of
  accumulate()'s last row, without its slow scan. None when M < 2 (a single column would be
  the fast axis)."""
  k = len(dims)
  start = start[tuple(slice(0, 1) if d in dims else slice(None) for d in range(start.ndim))]
  start = np.moveaxis(start, dims, tuple(range(k)))
  moved = [np.moveaxis(x, dims, tuple(range(k))) for x in xs]
  rest = broadcast_shape(start.shape[k:], *(x.shape[k:] for x in moved))
  M = 1
  for d in rest: M *= d
  if M < 2: return None
  n = 1
  for d in moved[0].shape[:k]: n *= d
  seq = np.empty((1 + n * len(moved), M), moved[0].dtype)   # C order, made here: the steps are the slow axis
  seq[0] = np.broadcast_to(start.reshape(start.shape[k:]), rest).reshape(M)
  body = seq[1:].reshape(n, len(moved), M)   # each point's contributions in chain order
  for j, x in enumerate(moved): body[:, j] = np.broadcast_to(x, x.shape[:k] + rest).reshape(n, M)
  ufunc = np.add if op == "ADD" else np.multiply
  return ufunc.reduce(seq, axis=0, dtype=seq.dtype).reshape(rest)


def _in_order(xs, dims, rest):
  """The arrays xs (same loop axes `dims`) as one (rest..., N*len(xs)) array: point after
  point in iteration order, each point's elements of xs in order."""
  k = len(dims)
  xs = [np.moveaxis(x, dims, tuple(range(k))) for x in xs]
  n = 1
  for d in xs[0].shape[:k]: n *= d
  parts = [np.moveaxis(np.broadcast_to(x, x.shape[:k] + rest).reshape((n,) + rest), 0, -1) for x in xs]
  if len(parts) == 1: return np.ascontiguousarray(parts[0])
  return np.stack(parts, axis=-1).reshape(rest + (n * len(parts),))


def _max_fold(seq, dt, acc_first, on=None):
  """The running MAX of decision max-nan (b if a < b else a) from seq[0]. With the
  accumulator first it is the first element reaching the running maximum of the non-NaN
  ones (a NaN start stays); otherwise it is folded one step at a time, skipping the steps
  that `on` (one per element of seq after the first) says do not run."""
  f = seq.astype(np.float32) if dt in VIA_F32 else seq
  out = np.empty_like(f)
  if not acc_first:
    out[0] = f[0]
    for t in range(1, len(f)):
      step = np.where(f[t] < out[t - 1], out[t - 1], f[t])
      out[t] = step if on is None else np.where(on[t - 1], step, out[t - 1])
    return out.astype(seq.dtype) if dt in VIA_F32 else out
  r = np.fmax.accumulate(f, axis=0)                         # NaN skipped (a NaN start: fmax keeps the rest...)
  r = np.where(np.isnan(f[0]), f[0], r)                     # ... but MAX(NaN, x) is NaN: it stays
  zero = f == 0
  if zero.any():   # equal zeros keep the first one met
    pos = np.where(zero, np.arange(len(f)).reshape((-1,) + (1,) * (f.ndim - 1)), len(f))
    first = np.minimum.accumulate(pos, axis=0)
    sign = np.take_along_axis(np.signbit(f), np.minimum(first, len(f) - 1), axis=0)
    r = np.where(r == 0, np.where(sign, -np.zeros((), f.dtype), np.zeros((), f.dtype)), r)
  return r.astype(seq.dtype) if dt in VIA_F32 else r


def _unflatten(seq, dims, sizes):
  """(N, rest...) back to the loop axes `dims` of sizes `sizes`."""
  return np.moveaxis(seq.reshape(tuple(sizes) + seq.shape[1:]), tuple(range(len(dims))), dims)


# ------------------------------------------------------------------ stepped loops
def run_stepped(scope, ctx):
  """Run the stepped nodes of carried loops one point at a time (see the module docstring);
  the loop's other nodes were computed for all points at once, and each step sees its slice."""
  Stepper(scope, ctx).run()


class Stepper:
  def __init__(self, scope, ctx):
    self.scope, self.ctx = scope, ctx
    m, plan = scope.m, scope.plan
    self.m, self.plan, self.nodes = m, plan, m.nodes
    self.spec = spec = plan.sequential[ctx.i]
    self.ranges = spec.ranges
    self.dims = [plan.axis_of[r] for r in spec.ranges]
    # a bound that varies over outer loops: run to the largest, each point only below its own
    # (the RANGEs ran before: Scope.loop_axis left their sizes and where each point runs)
    self.sizes = [scope.loop_sizes[d] for d in self.dims]
    self.varying = {d: scope.valid_of[d] for d in self.dims if scope.varying >> d & 1}
    self.inbody = set(spec.body) | spec.nested
    self.walk = [i for i in spec.body if i not in spec.nested and i not in plan.deferred]
    self.full = {j: scope.values[j] for j in spec.frontier if isinstance(scope.values.get(j), np.ndarray)}
    # what the stepped nodes see from before the loop; inside an enclosing stepped loop, a
    # carried storage starts from that loop's snapshot
    self.before = dict(merge_effects([scope.eff.get(j) for i in sorted(self.inbody) for j in self.nodes[i].src if j not in self.inbody]) or {})
    self.carried = {a: scope.storage(plan.root[a]) for a in spec.carried}
    self.written = {st.key: st for st in (scope.storage(plan.root[self.nodes[i].src[0]]) for i in self.inbody if role(self.nodes[i].op) == "store")}
    self.state, self.pre, self.outer = {}, {}, {}
    for a, st in self.carried.items():
      self.outer[a] = scope.override.get(a)
      seen = merge_effects([scope.eff.get(j) for j in self.nodes[a].src if j not in self.inbody]) or {}
      self.state[a] = self.pre[a] = self.outer[a] or seen.get(st.key) or st.base
      if self.outer[a] is not None: self.before[st.key] = self.outer[a]
    self.per_iter: dict = {}       # storage key -> [writes of point 0, writes of point 1, ...]
    self.storages: dict = {}
    self.traced: dict[int, list] = {}
    self.npoints = 0

  def run(self):
    scope = self.scope
    scope.pinned += 1
    scope.fixed.update(self.ranges)
    saved = [scope.loop_sizes[d] for d in self.dims]
    try:
      for d in self.dims: scope.loop_sizes[d] = 1
      for t, point in enumerate(itertools.product(*(range(n) for n in self.sizes))): self.step(t, point)
    finally:
      for d, n in zip(self.dims, saved): scope.loop_sizes[d] = n
      scope.pinned -= 1
      scope.fixed.difference_update(self.ranges)
      scope.values.update(self.full)
      for a, v in self.outer.items():
        if v is None: scope.override.pop(a, None)
        else: scope.override[a] = v
    self.finish()

  def step(self, t, point):
    scope, plan = self.scope, self.plan
    self.npoints = t + 1
    for r, p in zip(self.ranges, point): scope.values[r] = np.full((1,) * scope.R, p, dtype=np.int64)
    for j, a in self.full.items(): scope.values[j] = _at(a, self.dims, point)
    for d, v in self.varying.items(): scope.valid_of[d] = _at(v, [d], [point[self.dims.index(d)]])
    starts = {}
    for a, st in self.carried.items():   # the carried reads see everything earlier points stored
      keep = (plan.axes[a] & ~plan.carried_bits.get(a, 0)) | scope.private_bits(st)   # one state for all points of the carried loops
      arr = scope.materialize(self.state[a], keep, a)
      starts[st.key] = scope.override[a] = snapshot(st, np.array(arr), keep, self.pre[a])
    for i in self.walk: scope.step(i)
    last = merge_effects([scope.eff.get(i) for i in self.walk]) or {}
    _record_point_writes({k: v for k, v in last.items() if k in self.written}, starts, self.before, self.per_iter, self.storages, t)
    for a, st in self.carried.items(): self.state[a] = last.get(st.key, self.state[a])
    if self.m.tracing:
      for i in self.walk + sorted(self.spec.nested):
        v = self.m.trace.get(i) if i in self.spec.nested else scope.values.get(i)
        if isinstance(v, np.ndarray): self.traced.setdefault(i, []).append(v)

  def finish(self):
    """After the loop: the state before it plus every point's writes, write by write."""
    scope, nodes, ranges, dims, sizes = self.scope, self.nodes, self.ranges, self.dims, self.sizes
    for r, d, n in zip(ranges, dims, sizes):
      scope.values[r] = np.arange(n, dtype=np.int64).reshape((1,) * d + (n,) + (1,) * (scope.R - d - 1))
    scope.valid_of.update(self.varying)
    eff = dict(merge_effects([self.before] + [scope.eff.get(j) for j in nodes[self.ctx.i].src if j not in self.inbody]) or {})
    for key, iters in self.per_iter.items():
      st = self.storages[key]
      if len({len(ws) for ws in iters}) != 1:
        raise EvalError("the iterations of a stepped loop made different numbers of writes", ranges[0], "RANGE", rule="eval.unsupported")
      v = eff.get(key) or st.base
      for k in range(len(iters[0])): v = Version(st, v, _concat([ws[k] for ws in iters], dims, sizes))
      eff[key] = v
    for key, st in self.written.items():   # no point wrote it (an empty loop): still a storage the kernel stores into
      if key not in self.per_iter:
        nothing = Write(self.ctx.i, [], np.zeros((1,) * scope.R + st.shape, st.initial.dtype), np.zeros((1,) * scope.R, bool))
        eff[key] = Version(st, eff.get(key) or st.base, nothing)
    self.ctx.eff = eff
    if self.m.tracing:
      for i, vs in self.traced.items():
        if len(vs) == self.npoints and self.npoints and all(v.shape[d] == 1 for v in vs for d in dims): self.m.record(scope, i, _grid(vs, dims, sizes))
    if not scope.pinned:   # release what the body (and the loops inside it) used, once
      for i in sorted(self.inbody): scope.consumed(i)


def _at(a, dims, point):
  """The slice of a loop-prefixed array at one point of the loop axes `dims` (kept as size 1)."""
  return a[tuple(slice(point[dims.index(d)], point[dims.index(d)] + 1) if d in dims and a.shape[d] > 1 else slice(None)
                 for d in range(max(dims) + 1))]


def _record_point_writes(last: dict, starts: dict, before: dict, per_iter: dict, storages: dict, t: int):
  """Append point t's writes to per_iter (storage key -> one list of writes per point): the
  writes of each version in `last` made after the point started from `starts` (or the
  state before the loop); a storage the point did not write gets an empty list."""
  for key, ver in last.items():
    start = starts.get(key) or before.get(key) or ver.storage.base
    ws, v = [], ver
    while v is not None and v is not start and v.write is not None and v.seq > start.seq:
      ws.append(v.write); v = v.parent
    if ws:
      if key not in per_iter: per_iter[key] = [[] for _ in range(t)]
      per_iter[key].append(ws[::-1])
      storages[key] = ver.storage
  for key in per_iter:
    if len(per_iter[key]) < t + 1: per_iter[key].append([])


def _grid(xs, dims, sizes):
  """Per-point arrays (lexicographic over the loop axes `dims`, size 1 along them) as one
  array over those axes."""
  if not dims: return np.asarray(xs[0])
  per = len(xs) // sizes[0]
  return np.concatenate([_grid(xs[k * per:(k + 1) * per], dims[1:], sizes[1:]) for k in range(sizes[0])], axis=dims[0])


def _concat(ws, dims, sizes) -> Write:
  """The writes one store made at each point of the loops, as one write over all of them."""
  def cat(xs): return _grid([np.asarray(x) for x in xs], dims, sizes)
  first = ws[0]
  path = []
  for k, (kind, data) in enumerate(first.path):
    if kind == "index": path.append((kind, [cat([w.path[k][1][j] for w in ws]) for j in range(len(data))]))
    else: path.append((kind, data))
  gate = None if first.gate is None else cat([w.gate for w in ws])
  return Write(first.node, path, cat([w.value for w in ws]), gate, first.mode)
