"""Loops that carry a dependency through storage, evaluated without giving up vectorization.

A kernel is evaluated with every RANGE as an array axis: all iterations at once. That is
exact as long as no iteration reads what an earlier iteration of the same loop wrote.
The one way a kernel graph says "read what the previous iteration wrote" is an AFTER
that lists the RANGE itself (or a CAST of it) among its dependencies, `AFTER(acc, init, r)`, read inside
loop r, while a STORE inside loop r writes the same storage (tinygrad's accumulator:
`acc.after(acc_init, *reduce_ranges)`). Such a loop is *carried*; a read through an
AFTER that does not list the loop sees only what its dependencies stored (the
unordered-read rule of refimpl/storage.py), so nothing else is carried.

A carried loop is evaluated in one of two ways:

1. Accumulation (the common case). Every store into the carried storage in loop r has
   the form `STORE(T, OP(read, x))` (or `MULACC(a, b, read)`, which is ADD with
   x = a*b): OP is one of the REDUCE ops (ADD, MUL, MAX), `read` reads the carried
   storage at the same place T writes (same index nodes or equal constants, not
   depending on r) and is used only there, and x does not depend on any carried read.
   Then the value after iteration t is OP-accumulated over x[0..t]: one
   `ufunc.accumulate` along r's axis, starting from the value before the loop, in the
   dtype, in iteration order -- bit for bit what the sequential loop computes (float
   rounding included; the gate of the store masks x with the identity). The reads and
   the updates inside the loop get the exclusive and inclusive scans (only computed
   when tracing), and the store writes the final value once. An AFTER listing several
   RANGEs (`acc.after(init, r0, r1)`) carries all of them: the points of those loops are
   flattened in iteration order (lexicographic, outer loop first) into one axis for
   the accumulate.

2. Anything else (`acc = acc*2 + x`, a read elsewhere in the buffer, a store at a
   varying place): loop r runs sequentially, one iteration at a time, while every other
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
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import UNITS, role
from tinyspec.refimpl.numeric import canonical_nan
from tinyspec.refimpl.storage import Write, Version, snapshot, merge_effects


# ------------------------------------------------------------------ static analysis
def storage_id(nodes, i):
  """Storage roots that name the same storage (the same input, or one register)."""
  n = nodes[i]
  a = n.arg
  if a.get("addrspace", "GLOBAL") != "GLOBAL": return ("local", i)
  return (n.op, a.get("name") or a.get("slot"))


def listed_ranges(nodes, a) -> list:
  """The RANGEs an AFTER lists among its dependencies, each either itself or seen through
  CASTs (an importer that types RANGEs as int lists `CAST(r)`; it orders the same)."""
  out = []
  for j in nodes[a].src[1:]:
    while nodes[j].op in ("CAST", "BITCAST") and nodes[j].src: j = nodes[j].src[0]
    if nodes[j].op == "RANGE": out.append(j)
  return out


def find_carried(plan, nodes):
  """Fill plan.reductions (STORE -> Accumulation), plan.sequential (END -> Sequential),
  plan.in_loop (nodes a sequential loop runs), plan.carried_bits (carried AFTER -> the
  loop axes it carries) and add the deferred updates."""
  plan.reductions, plan.sequential, plan.in_loop, plan.carried_bits = {}, {}, set(), {}
  axes, axis_of = plan.axes, plan.axis_of
  stores: dict = {}
  for i in plan.order:
    if role(nodes[i].op) == "store" and nodes[i].src[0] in plan.root:
      stores.setdefault(storage_id(nodes, plan.root[nodes[i].src[0]]), []).append(i)
  # each carried AFTER carries the RANGEs it lists that a store into its storage varies over
  groups: dict[tuple, list] = {}     # the carried RANGEs (outer first) -> the AFTERs carrying exactly them
  sets_of_range, sets_of_storage = {}, {}
  for a in plan.order:
    if role(nodes[a].op) != "after" or a not in plan.read: continue
    sid = storage_id(nodes, plan.root[a])
    rs = {r for r in listed_ranges(nodes, a) if r in axis_of and any(axes[s] >> axis_of[r] & 1 for s in stores.get(sid, ()))}
    if not rs: continue
    key = tuple(sorted(rs, key=axis_of.get))
    groups.setdefault(key, []).append(a)
    plan.carried_bits[a] = _bits(axis_of, key)
    sets_of_storage.setdefault(sid, set()).add(key)
    for r in key: sets_of_range.setdefault(r, set()).add(key)
  # a loop (or a storage) carried together with different sets of loops is no plain accumulation
  tangled = {key for sets in list(sets_of_range.values()) + list(sets_of_storage.values()) if len(sets) > 1 for key in sets}
  sequential = set()
  for key, afters in groups.items():
    specs = None if key in tangled else _accumulations(plan, nodes, key, afters, stores)
    if specs is None:
      sequential.update(key)
      continue
    for s, spec in specs.items():
      plan.reductions[s] = spec
      plan.deferred.add(spec.update)
  if sequential: _sequential(plan, nodes, sequential)


def _bits(axis_of, ranges) -> int:
  mask = 0
  for r in ranges: mask |= 1 << axis_of[r]
  return mask


class Accumulation:
  """STORE(T, OP(read, x)) carried through the loops `ranges` (outer first)."""
  __slots__ = ("ranges", "op", "read", "update", "contribution")

  def __init__(self, ranges, op, read, update, contribution):
    self.ranges, self.op, self.read, self.update, self.contribution = ranges, op, read, update, contribution


def _index_signature(plan, nodes, i):
  """The index sources along a storage chain, as comparable keys."""
  sig = []
  for link in plan.chain_links(i):
    n = nodes[link]
    if role(n.op) == "through" and len(n.src) > 1:
      sig.append(tuple(_const_key(nodes, j) for j in n.src[1:]))
    elif role(n.op) == "view": sig.append(("view", n.arg["offset"], n.arg["size"], n.arg["dtype"]))
  return tuple(sig)


def _const_key(nodes, j):
  n = nodes[j]
  if n.op == "CONST": return ("c", repr(n.arg["value"]), n.arg["dtype"])
  if n.op == "VCONST": return ("v", repr(list(n.arg["values"])), n.arg["dtype"])
  return ("n", j)


def _accumulations(plan, nodes, ranges, afters, stores):
  bit = _bits(plan.axis_of, ranges)
  carried_afters = set(afters)
  sids = {storage_id(nodes, plan.root[a]) for a in afters}
  body_stores = [s for sid in sids for s in stores.get(sid, ()) if plan.axes[s] & bit]
  specs, places = {}, {}
  for s in body_stores:
    st = nodes[s]
    if st.op != "STORE": return None
    v = st.src[1]
    u = UNITS.get(nodes[v].op)
    if u is None or u.accumulates is None or plan.data_uses[v] != [(s, 1)]: return None
    slot, op, contribution = u.accumulates
    spec = None
    for k in ([slot] if slot is not None else range(len(nodes[v].src))):
      rd = nodes[v].src[k]
      if rd not in plan.root or plan.data_uses[rd] != [(v, k)]: continue
      if not any(l in carried_afters for l in [rd] + plan.chain_links(rd)): continue
      if storage_id(nodes, plan.root[rd]) != storage_id(nodes, plan.root[st.src[0]]): continue
      sig = _index_signature(plan, nodes, rd)
      if sig != _index_signature(plan, nodes, st.src[0]): continue
      if any(plan.axes[j] & bit for part in sig for key in part if isinstance(key, tuple) and key[0] == "n" for j in [key[1]]): continue
      others = [j for kk, j in enumerate(nodes[v].src) if kk != k]
      if any(_reaches(plan, nodes, j, carried_afters, bit) for j in others): continue
      spec = Accumulation(ranges, op, rd, v, contribution)
      places.setdefault(storage_id(nodes, plan.root[rd]), []).append(sig)
      break
    if spec is None: return None
    specs[s] = spec
  for sigs in places.values():   # several accumulators in one buffer: at distinct constant places
    if len(sigs) > 1 and (len(set(sigs)) != len(sigs) or any(k[0] == "n" for sig in sigs for part in sig for k in part if isinstance(k, tuple))):
      return None
  # the carried storage must not be read anywhere else in the loop
  reads = {spec.read for spec in specs.values()}
  updates = {spec.update for spec in specs.values()}
  for a in carried_afters:
    for c, k in plan.data_uses[a]:
      if c in reads or c in updates: continue
      if k == 0 and (role(nodes[c].op) == "store" or (c in plan.root and c not in plan.read)): continue
      return None
  return specs


def _reaches(plan, nodes, j, targets, bit) -> bool:
  """Does j depend on one of targets, looking only inside the loop (nodes that vary with it)?"""
  stack, seen = [j], set()
  while stack:
    x = stack.pop()
    if x in targets: return True
    if x in seen or not plan.axes.get(x, 0) & bit: continue
    seen.add(x)
    stack.extend(nodes[x].src)
  return False


class Sequential:
  """The carried loops `ranges` (outer first) closed by one END, run one point at a time
  over `body`; `nested` are the nodes of sequential loops inside it (run by their END)."""
  __slots__ = ("ranges", "body", "carried", "nested")

  def __init__(self, ranges, body, carried):
    self.ranges, self.body, self.carried, self.nested = ranges, body, carried, set()


def _sequential(plan, nodes, ranges):
  by_end: dict[int, list] = {}
  for r in ranges:
    ends = [i for i in plan.order if role(nodes[i].op) == "close" and r in nodes[i].src[1:]]
    if len(ends) != 1:
      raise EvalError(f"RANGE node {r} carries a dependency through storage but is closed by {len(ends)} ENDs (one is needed)", r, "RANGE", rule="eval.unsupported")
    by_end.setdefault(ends[0], []).append(r)
  for e, rs in by_end.items():
    rs.sort(key=plan.axis_of.get)
    bits = _bits(plan.axis_of, rs)
    body = [i for i in plan.order if plan.axes.get(i, 0) & bits and i < e]
    late = [i for i in plan.order if plan.axes.get(i, 0) & bits and i > e]
    if late:
      raise EvalError(f"node {late[0]} still depends on a RANGE closed by END node {e} after it", late[0], nodes[late[0]].op, rule="eval.unsupported")
    carried = [a for a in body if role(nodes[a].op) == "after" and any(r in listed_ranges(nodes, a) for r in rs)]
    plan.sequential[e] = Sequential(tuple(rs), body, carried)
    plan.in_loop.update(body)
  for e, spec in plan.sequential.items():   # the sequential loops inside each one, at any depth
    inbody = set(spec.body)
    stack = [x for x in plan.sequential if x != e and x in inbody]
    while stack:
      new = set(plan.sequential[stack.pop()].body) - spec.nested
      spec.nested |= new
      stack.extend(x for x in plan.sequential if x != e and x in new)


# ------------------------------------------------------------------ accumulation at runtime
def reduction_write(scope, s, path, gate) -> Write:
  """The write of an accumulation store: the value after the last iteration of its loops."""
  spec = scope.plan.reductions[s]
  m, plan = scope.m, scope.plan
  node_v = m.nodes[spec.update]
  dims = [plan.axis_of[r] for r in spec.ranges]
  sizes = [scope.loop_sizes[d] for d in dims]
  k_read = node_v.src.index(spec.read)
  start = scope.values[spec.read]
  srcs = [scope.values[j] for kk, j in enumerate(node_v.src) if kk != k_read]
  rank = len(m.views[spec.update].shape)
  srcs = [scope.align(a, rank) for a in srcs]
  x = spec.contribution(m.views[spec.update].dtype, *srcs) if spec.contribution else srcs[0]
  x = scope.align(np.asarray(x), rank)
  dt = m.views[spec.update].dtype
  (x,) = scope.full_along(spec.ranges, x)
  start = scope.align(start, rank)
  valid = scope.loop_validity(spec.ranges)
  g = gate if valid is None else (valid if gate is None else gate & valid)
  if g is not None:
    g = np.broadcast_to(g.reshape(g.shape + (1,) * (x.ndim - g.ndim)), np.broadcast_shapes(g.shape + (1,) * (x.ndim - g.ndim), x.shape))
    x = np.where(g, x, _masked(spec.op, dt))
  seq = canonical_nan(accumulate(spec.op, dt, start, x, dims, acc_first=k_read == 0), dt)   # (N + 1, rest...): N points of the loops, in iteration order
  if m.tracing:
    m.record(scope, spec.read, _unflatten(seq[:-1], dims, sizes))
    m.record(scope, spec.update, _unflatten(seq[1:], dims, sizes))
  final = np.expand_dims(seq[-1], tuple(dims))
  return Write(s, [(k, dd) for k, dd, _ in path], final, None)


def _masked(op, dt):
  """What a gated-off iteration contributes: an identity that keeps every value, -0.0 included."""
  from tinyspec.refimpl.ops.reduce import identity
  if op == "ADD" and dt in ("float16", "bfloat16", "float32", "float64"): return np.asarray(-0.0).astype(identity(op, dt).dtype)
  return identity(op, dt)


def accumulate(op, dt, start, x, dims, acc_first=True):
  """[start, OP(start, x0), OP(OP(start, x0), x1), ...] over the points of the loop axes
  `dims` (ascending) in iteration order (lexicographic), in the dtype: an array of shape
  (N + 1, rest...) where rest is x's shape without `dims`. acc_first: the accumulator is
  OP's first operand (MAX is not symmetric: decision max-nan)."""
  k = len(dims)
  front = tuple(range(k))
  start = start[tuple(slice(0, 1) if d in dims else slice(None) for d in range(start.ndim))]   # the value before the loops
  start, x = np.moveaxis(start, dims, front), np.moveaxis(x, dims, front)
  rest = np.broadcast_shapes(start.shape[k:], x.shape[k:])
  n = 1
  for d in x.shape[:k]: n *= d
  start = np.broadcast_to(start.reshape((1,) + start.shape[k:]), (1,) + rest)
  x = np.broadcast_to(x, x.shape[:k] + rest).reshape((n,) + rest)
  seq = np.concatenate([start, x], axis=0)
  if op == "ADD": return np.add.accumulate(seq, axis=0, dtype=seq.dtype)
  if op == "MUL": return np.multiply.accumulate(seq, axis=0, dtype=seq.dtype)
  if not (seq.dtype.kind == "f" or dt == "bfloat16"): return np.maximum.accumulate(seq, axis=0)
  return _max_fold(seq, dt, acc_first)


def _max_fold(seq, dt, acc_first):
  """The running MAX of decision max-nan (b if a < b else a) from seq[0]. With the
  accumulator first it is the first element reaching the running maximum of the non-NaN
  ones (a NaN start stays); otherwise it is folded one step at a time."""
  f = seq.astype(np.float32) if dt == "bfloat16" else seq
  out = np.empty_like(f)
  if not acc_first:
    out[0] = f[0]
    for t in range(1, len(f)): out[t] = np.where(f[t] < out[t - 1], out[t - 1], f[t])
    return out.astype(seq.dtype) if dt == "bfloat16" else out
  r = np.fmax.accumulate(f, axis=0)                         # NaN skipped (a NaN start: fmax keeps the rest...)
  r = np.where(np.isnan(f[0]), f[0], r)                     # ... but MAX(NaN, x) is NaN: it stays
  zero = f == 0
  if zero.any():   # equal zeros keep the first one met
    pos = np.where(zero, np.arange(len(f)).reshape((-1,) + (1,) * (f.ndim - 1)), len(f))
    first = np.minimum.accumulate(pos, axis=0)
    sign = np.take_along_axis(np.signbit(f), np.minimum(first, len(f) - 1), axis=0)
    r = np.where(r == 0, np.where(sign, -np.zeros((), f.dtype), np.zeros((), f.dtype)), r)
  return r.astype(seq.dtype) if dt == "bfloat16" else r


def _unflatten(seq, dims, sizes):
  """(N, rest...) back to the loop axes `dims` of sizes `sizes`."""
  return np.moveaxis(seq.reshape(tuple(sizes) + seq.shape[1:]), tuple(range(len(dims))), dims)


# ------------------------------------------------------------------ sequential loops
def run_sequential(scope, ctx):
  """Run the body of carried loops one point at a time (see the module docstring)."""
  m, plan = scope.m, scope.plan
  spec = plan.sequential[ctx.i]
  ranges, body = spec.ranges, spec.body
  dims = [plan.axis_of[r] for r in ranges]
  nodes = m.nodes
  # a bound that varies over outer loops: run to the largest, each point only below its own
  bounds = [np.asarray(scope.values[nodes[r].src[0]]) for r in ranges]
  sizes = [max(int(b.max()), 0) if b.size else 0 for b in bounds]
  varying = [(d, b) for d, b in zip(dims, bounds) if b.size > 1]
  for d, _ in varying: scope.varying |= 1 << d
  inbody = set(body)
  walk = [i for i in body if i not in ranges and i not in spec.nested and i not in plan.deferred]
  # what the body sees from before the loop; inside an enclosing sequential loop, a carried
  # storage starts from that loop's snapshot
  before = dict(merge_effects([scope.eff.get(j) for i in body for j in nodes[i].src if j not in inbody]) or {})
  carried = {a: scope.storage(plan.root[a]) for a in spec.carried}
  state, pre, outer = {}, {}, {}
  for a, st in carried.items():
    outer[a] = scope.override.get(a)
    seen = merge_effects([scope.eff.get(j) for j in nodes[a].src if j not in inbody]) or {}
    state[a] = pre[a] = outer[a] or seen.get(st.key) or st.base
    if outer[a] is not None: before[st.key] = outer[a]
  per_iter: dict = {}       # storage key -> [writes of point 0, writes of point 1, ...]
  storages: dict = {}
  traced: dict[int, list] = {}
  scope.pinned += 1
  scope.fixed.update(ranges)
  saved = [scope.loop_sizes[d] for d in dims]
  npoints = 0
  try:
    for d in dims: scope.loop_sizes[d] = 1
    for t, point in enumerate(itertools.product(*(range(n) for n in sizes))):
      npoints = t + 1
      for r, p in zip(ranges, point): scope.values[r] = np.full((1,) * scope.R, p, dtype=np.int64)
      for d, b in varying: scope.valid_of[d] = point[dims.index(d)] < b
      starts = {}
      for a, st in carried.items():   # the carried reads see everything earlier points stored
        keep = (plan.axes[a] & ~plan.carried_bits.get(a, 0)) | scope.private_bits(st)   # one state for all points of the carried loops
        arr = scope.materialize(state[a], keep, a)
        starts[st.key] = scope.override[a] = snapshot(st, np.array(arr), keep, pre[a])
      for i in walk: scope.step(i)
      last = merge_effects([scope.eff.get(i) for i in walk]) or {}
      _record_point_writes(last, starts, before, per_iter, storages, t)
      for a, st in carried.items(): state[a] = last.get(st.key, state[a])
      if m.tracing:
        for i in walk + sorted(spec.nested):
          v = m.trace.get(i) if i in spec.nested else scope.values.get(i)
          if isinstance(v, np.ndarray): traced.setdefault(i, []).append(v)
  finally:
    for d, n in zip(dims, saved): scope.loop_sizes[d] = n
    scope.pinned -= 1
    scope.fixed.difference_update(ranges)
    for a, v in outer.items():
      if v is None: scope.override.pop(a, None)
      else: scope.override[a] = v
  for r, d, n in zip(ranges, dims, sizes):
    scope.values[r] = np.arange(n, dtype=np.int64).reshape((1,) * d + (n,) + (1,) * (scope.R - d - 1))
  for d, b in varying: scope.valid_of[d] = scope.values[ranges[dims.index(d)]] < b   # as Scope.loop_axis leaves it
  # after the loop: the state before it plus every point's writes, write by write
  eff = dict(merge_effects([before] + [scope.eff.get(j) for j in nodes[ctx.i].src if j not in inbody]) or {})
  for key, iters in per_iter.items():
    st = storages[key]
    if len({len(ws) for ws in iters}) != 1:
      raise EvalError("the iterations of a sequential loop made different numbers of writes", ranges[0], "RANGE", rule="eval.unsupported")
    v = eff.get(key) or st.base
    for k in range(len(iters[0])): v = Version(st, v, _concat([ws[k] for ws in iters], dims, sizes))
    eff[key] = v
  ctx.eff = eff
  if m.tracing:
    for i, vs in traced.items():
      if len(vs) == npoints and npoints and all(v.shape[d] == 1 for v in vs for d in dims): m.record(scope, i, _grid(vs, dims, sizes))
  if not scope.pinned:   # release what the body (and the loops inside it) used, once
    for i in sorted(inbody | spec.nested): scope.consumed(i)


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
      per_iter.setdefault(key, [[] for _ in range(t)]).append(ws[::-1])
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
