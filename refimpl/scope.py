"""One evaluation pass: the nodes of a graph, a function body or a kernel, in order.

Every node is computed once from its sources' values by its unit (refimpl/ops), after a
budget check; a value is dropped when its last consumer has run (unless tracing). Each
node also carries its *effects*: for every storage a STORE ordered before it touched,
the Version that store made (refimpl/storage.py). AFTER reads the version its sources
carry; STORE makes a new one.

In a kernel (refimpl/plan.py decides the loop axes) every value has one leading array
axis per loop, of size 1 where it does not depend on that loop, followed by its own
shape; elementwise units see operands whose own dims are right-aligned. Loops that carry
a dependency through storage are refimpl/loops.py's business.
"""
from __future__ import annotations
import numpy as np
from tinyspec.dispatch import input_name
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import UNITS, role
from tinyspec.refimpl.numeric import NP, CLS, VIA_F32, canonical_nan, broadcast_shape
from tinyspec.refimpl.storage import Version, Write, Storage, materialize, gather, layout, zero_invalid, merge_effects, strided
from tinyspec.refimpl.ops.elementwise import truth
from tinyspec.refimpl.ops.source import byte_view
from tinyspec.refimpl import loops
from tinyspec.portable import applies, variant_scope
from tinyspec.dtypes import DTYPES


def flush_subnormals(x: np.ndarray, dt: str) -> np.ndarray:
  """x with every subnormal of dtype dt replaced by a zero of its sign."""
  tiny = DTYPES[dt].normal_range[0]
  f = x.astype(np.float32) if dt in VIA_F32 else x
  with np.errstate(invalid="ignore"):
    sub = (f != 0) & (np.abs(f) < tiny)
  if not sub.any(): return x
  return np.where(sub, np.copysign(np.zeros((), f.dtype), f).astype(x.dtype), x)

_FACTOR = {"elementwise": 2.0, "decomposed": 3.0}   # temporaries per result byte (float32/64 round trips)


class NodeCtx:
  """What a unit sees: the node, its derived properties and its sources' values."""
  __slots__ = ("s", "i", "node", "view", "eff")

  def __init__(self, s, i, eff):
    self.s, self.i, self.eff = s, i, eff
    self.node, self.view = s.m.nodes[i], s.m.views[i]

  @property
  def op(self): return self.node.op
  @property
  def arg(self): return self.node.arg
  @property
  def dtype(self): return self.view.dtype
  @property
  def shape(self): return self.view.shape
  @property
  def R(self): return self.s.R
  @property
  def kernel(self): return self.s.kernel
  def value(self, k): return self.s.values[self.node.src[k]]
  def src_dtype(self, k): return self.s.m.views[self.node.src[k]].dtype
  def src_shape(self, k): return self.s.m.views[self.node.src[k]].shape
  def need(self, nbytes: int): self.s.m.budget.need(nbytes, self.i, self.node.op)   # a copy a unit's estimate left out

  def shape_value(self, k):
    v = self.s.m.views[self.node.src[k]].value
    return v if isinstance(v, tuple) else (v,)


class Scope:
  def __init__(self, m, plan, kind: str, bindings: dict | None = None):
    self.m, self.plan, self.kind = m, plan, kind
    self.kernel = plan.kernel
    self.R = plan.naxes
    self.loop_sizes = [1] * self.R
    self.valid_of: dict[int, np.ndarray] = {}   # loop axis -> iterations that run (bounds that vary)
    self.varying = 0
    self.bindings = bindings
    self.values: dict = {}
    self.eff: dict = {}
    self.held: dict = {}        # tensor-level STOREs keep their new contents alive here
    self.oob: dict = {}         # gated reads: where the index was in range
    self.if_gate: dict = {}
    self.override: dict = {}    # AFTER -> Version, inside a stepped loop
    self.storages: dict = {}    # root node -> Storage
    self.local: dict = {}       # scope-local storage key -> Storage
    self.pinned = 0
    self.fixed: set[int] = set()   # RANGEs holding one iteration (inside a stepped loop)
    self.keep = set(plan.roots)
    # loop indices that lazy index arithmetic (refimpl/affine.py) may read at any later node:
    # freed only after their last use of any kind, never after their last use as a value
    self.read_late = set(getattr(plan, "loop_nodes", ())) if plan.lazy else set()
    self.tracing = m.tracing
    self.plain = not m.variants          # no variant: values the graph fixes may be kept (Plan.constant)
    self.flush = "flush" in m.variants
    counts, value_uses = plan.use_counts()
    self.counts, self.value_uses = dict(counts), dict(value_uses)

  # ---------------------------------------------------------------- the walk
  def run(self):
    skip = self.plan.deferred | self.plan.in_loop | self.plan.lazy
    for i in self.plan.order:
      if i not in skip: self.step(i)

  def node_info(self, i) -> tuple:
    """What step() needs of node i that the plan fixes: (unit, whether it is a link no one
    reads, bytes per point its value may take or None, the rank its ALU operands align to or
    None, whether its float NaNs are made canonical, its NumPy dtype). Kept in the plan."""
    m, plan = self.m, self.plan
    node, view = m.nodes[i], m.views[i]
    u = UNITS[node.op]
    unread_link = i in plan.root and i not in plan.read and u.role in ("through", "view")
    per_point = None
    if u.alloc and not unread_link:
      dt = view.dtype
      per_point = 0.0
      if isinstance(dt, str) and dt != "void" and isinstance(view.shape, tuple):
        per_point = NP[dt].itemsize * u.alloc * _FACTOR.get(m.T.ops[node.op].category, 1.0)
        for d in view.shape: per_point *= d
    rank = len(view.shape) if self.R and node.op in m.T.alu_ops else None
    canon = m.T.ops[node.op].nan == "canonical" and CLS.get(view.dtype) == "float"
    info = plan.info[i] = (u, unread_link, per_point, rank, canon, NP.get(view.dtype))
    return info

  def step(self, i):
    m, plan = self.m, self.plan
    if i in plan.constant and self.plain:
      val = plan.const_values.get(i)
      if val is not None:   # the graph alone fixes it: the value an earlier evaluation computed
        self.values[i] = val
        if not self.pinned: self.consumed(i)
        return
    node = m.nodes[i]
    info = plan.info.get(i) or self.node_info(i)
    u, unread_link, per_point = info[:3]
    if node.src and self.eff:
      # a node inside a stepped loop holds only its last iteration's effects: outside the
      # loop (a LINEAR listing it, its END) the loop's END stands for all of them
      inner = plan.in_loop if plan.in_loop and i not in plan.in_loop else ()
      effs = [e for j in node.src if j not in inner and (e := self.eff.get(j))]
      eff = None if not effs else effs[0] if len(effs) == 1 else merge_effects(effs)
    else: eff = None
    ctx = NodeCtx(self, i, eff)
    if per_point is not None: m.budget.need(int(per_point * self.loop_numel(plan.axes.get(i, 0))), i, node.op)
    flush = self.flush and node.op in variant_scope("flush")
    if flush: saved = self.flush_sources(i)
    try:
      if unread_link: val = None
      elif u.raw: val = u.fn(ctx)
      else: val = u.fn(ctx, *self.args(i, info[3]))
    except MemoryError as e:   # an allocation no estimate foresaw: refused as the budget would, not a crash
      raise EvalError(f"its value could not be allocated ({e}); the memory budget is {m.budget.limit:,} bytes", i, node.op, rule="eval.budget") from None
    if flush:
      self.values.update(saved)
      if isinstance(val, np.ndarray) and isinstance(ctx.dtype, str) and CLS.get(ctx.dtype) == "float" and applies("flush", node.op, ctx.dtype):
        val = flush_subnormals(val, ctx.dtype)
    if val is not None and not isinstance(val, tuple): val = self.finish(i, val, info)
    if i in plan.constant and self.plain and isinstance(val, np.ndarray):
      val = val.view(); val.flags.writeable = False   # shared by later evaluations: no one may write to it
      plan.const_values[i] = val
    self.values[i] = val
    if ctx.eff: self.eff[i] = ctx.eff
    if m.tracing: m.record(self, i, val)
    if not self.pinned: self.consumed(i)

  def flush_sources(self, i) -> dict:
    """The `flush` variant (decision denormals): the node's float sources of the dtypes the
    variant covers read with subnormals as zeros; returns the values to put back."""
    saved = {}
    for j in self.m.nodes[i].src:
      v, dt = self.values.get(j), self.m.views[j].dtype
      if isinstance(v, np.ndarray) and isinstance(dt, str) and CLS.get(dt) == "float" and applies("flush", self.m.nodes[i].op, dt):
        saved[j] = v
        self.values[j] = flush_subnormals(v, dt)
    return saved

  def consumed(self, i):
    listing = i in self.plan.listing
    for j in self.m.nodes[i].src: self.release(j, listing)
    for j in self.plan.extra.get(i, ()): self.release(j)

  def release(self, j, listing=False):
    """One use of j done: its value goes after its last use as a value (a program's LINEAR
    lists every node, and keeping them all for it ran large programs out of memory), its
    effects after its last use of any kind."""
    c = self.counts.get(j, 0) - 1
    self.counts[j] = c
    if j in self.keep or self.tracing: return
    if not listing:
      self.value_uses[j] = left = self.value_uses.get(j, 0) - 1
      if left <= 0 < c and j not in self.plan.deferred and j not in self.read_late: self.values.pop(j, None)
    if c > 0: return
    self.values.pop(j, None); self.eff.pop(j, None); self.held.pop(j, None)
    if j in self.plan.deferred: self.consumed(j)

  def args(self, i, rank=None):
    """The values of node i's sources; an ALU op's (rank not None) with their own dims aligned."""
    vals = [self.values[j] for j in self.m.nodes[i].src]
    if rank is not None: vals = [self.align(a, rank) for a in vals]
    return vals

  def align(self, a, rank):
    """Insert size-1 dims after the loop axes so that a's own dims are right-aligned to rank."""
    k = a.ndim - self.R
    return a if k >= rank else a.reshape(a.shape[:self.R] + (1,) * (rank - k) + a.shape[self.R:])

  def finish(self, i, val, info=None):
    val = np.asarray(val)
    view = self.m.views[i]
    if self.R and val.ndim == len(view.shape): val = val.reshape((1,) * self.R + val.shape)
    _, _, _, _, canon, want = info or self.plan.info.get(i) or self.node_info(i)
    if want is not None and val.dtype != want:
      raise EvalError(f"internal error: the unit made {val.dtype} where the node has dtype {view.dtype}", i, self.m.nodes[i].op, rule="eval.internal")
    if canon: val = canonical_nan(val, view.dtype)
    self.m.budget.track(val)
    return val

  def loop_numel(self, mask) -> int:
    n, d = 1, 0
    while mask:
      if mask & 1: n *= self.loop_sizes[d]
      mask >>= 1; d += 1
    return n

  # ---------------------------------------------------------------- storage
  def storage(self, i) -> Storage:
    st = self.storages.get(i)
    if st is not None: return st
    m = self.m
    node, view = m.nodes[i], m.views[i]
    arg = node.arg
    addr = arg.get("addrspace", "GLOBAL")
    if node.op == "PARAM" and self.bindings is not None:
      slot = arg["slot"]
      key = (id(self), "param", slot)
      st = self.local.get(key)
      if st is None:
        if slot not in self.bindings: raise EvalError(f"PARAM slot {slot} has no argument", i, node.op, rule="FUNCTION.param")
        st = self.local[key] = Storage(key, input_name("PARAM", {"slot": slot}), view.dtype, view.shape, addr, np.asarray(self.bindings[slot]))
    elif addr != "GLOBAL":
      key = (id(self), "local", i)
      st = self.local[key] = Storage(key, f"{addr.lower()}{arg.get('slot', i)}", view.dtype, view.shape, addr, np.zeros(view.shape, NP[view.dtype]), output=False)
    else:
      st = m.global_storage(i)
    if len(node.src) == 3: self.check_bounds(i, st)
    if st.dtype != view.dtype or st.shape != tuple(view.shape):
      raise EvalError(f"storage {st.name} is used as {view.dtype}{list(view.shape)} here and as {st.dtype}{list(st.shape)} elsewhere", i, node.op, rule="eval.storage")
    self.storages[i] = st
    return st

  def check_bounds(self, i, st):
    """A symbolic size: its value must lie in [min, max]."""
    node = self.m.nodes[i]
    lo, hi = (self.values[j] for j in node.src[1:3])
    v = st.initial
    if v.size and (np.any(v < lo.min()) or np.any(v > hi.max())):
      raise EvalError(f"{st.name} = {v.reshape(-1)[0]} is outside its bounds [{lo.reshape(-1)[0]}, {hi.reshape(-1)[0]}]", i, node.op, rule="PARAM.bounds", exit_code=2)

  def root_value(self, i):
    st = self.storage(i)
    if i not in self.plan.read: return None
    return self.materialize(st.base, 0, i)

  def private_bits(self, st) -> int:
    """The loop axes along which each point has its own copy of storage st (decision
    kernel-loops: REG per thread, LOCAL per workgroup)."""
    return self.plan.private.get(st.addrspace, 0) if self.kernel else 0

  def materialize(self, ver, keep, i):
    st = ver.storage
    keep |= self.private_bits(st)
    if ver.cached(keep) is None and ver.write is not None:
      self.m.budget.need(int(st.initial.nbytes * self.loop_numel(keep)) * 2, i, self.m.nodes[i].op, "the buffer's contents")
    out = materialize(ver, keep, tuple(self.loop_sizes), self.R)
    self.m.budget.track(out)
    return out

  def index_value(self, j):
    """Node j's value; index arithmetic the plan left lazy (refimpl/affine.py) built from its form."""
    v = self.values.get(j)
    if v is not None or j not in self.plan.lazy: return self.values[j]
    f = self.plan.forms[j]
    out = np.full((1,) * self.R, f.const, np.int64)
    for d, c in f.coefs.items(): out = out + c * self.values[self.plan.loop_nodes[d]]   # arange, or one iteration in a stepped loop
    if f.vec is not None: out = out[..., None] + (f.vec[0] + f.vec[1] * np.arange(f.vec[2], dtype=np.int64))
    return self.finish(j, out.astype(NP[self.m.views[j].dtype]))

  def index_values(self, i) -> list:
    return [self.index_value(j) for j in self.m.nodes[i].src[1:]]

  def runtime_path(self, t, affine=False) -> list:
    """The steps from t's storage root to t: ("index", index arrays, link), ("view", ...), or
    for a plain store through one affine INDEX ("affine", (form, loop sizes), link): the
    write's positions as a form (storage.apply_write), its index arithmetic never computed."""
    steps = []
    nodes = self.m.nodes
    form = self.plan.affine_targets.get(t) if affine and not self.pinned and not self.m.strict_bounds else None
    if form is not None: return [("affine", (form, tuple(self.loop_sizes)), t)]
    for link in self.plan.chain_links(t):
      n = nodes[link]
      r = role(n.op)
      if r == "through" and len(n.src) > 1: steps.append(("index", self.index_values(link), link))
      elif r == "view": steps.append(("view", (n.arg["offset"], n.arg["size"], NP[n.arg["dtype"]]), link))
    return steps

  # ---------------------------------------------------------------- reads
  def read_index(self, i, T, idxs=None):
    """T read through INDEX node i; idxs the index values (None: the node's sources)."""
    node = self.m.nodes[i]
    R = self.R
    aff = self.plan.affine.get(i)
    if aff is not None:
      view = self.affine_read(T, aff)
      if view is not None: return view
    if idxs is None: idxs = self.index_values(i)
    if R and len(idxs) == 1:
      d = self.plan.axis_of.get(node.src[1])
      if d is not None and node.src[1] not in self.fixed and T.shape[d] == 1 and T.ndim > R and self.loop_sizes[d] <= T.shape[R] and not (self.varying >> d & 1):
        t = np.swapaxes(T, d, R)[(slice(None),) * d + (slice(0, self.loop_sizes[d]),)]   # x[i] for the loop index i: a view
        return t.reshape(t.shape[:R] + t.shape[R + 1:])
    out, valid = gather(T, idxs, R)
    if valid is None: return out
    if self.kernel and self.m.strict_bounds:
      if i in self.plan.gated: self.oob[i] = (valid, idxs)
      else:
        g = self.guard(i)
        bad = ~valid if g is None else (~valid & g.reshape(g.shape + (1,) * (valid.ndim - g.ndim)))
        if np.any(bad): self.out_of_bounds(i, node, idxs, bad, "read")
    return zero_invalid(out, valid)   # decision index-oob: an out-of-range element reads as zero

  def affine_read(self, T, aff):
    """gather() of an index that is affine in the loop indices (refimpl/affine.py), as a
    read-only strided view of T; None where the gather must do it (T differs between
    points, an axis is held at one iteration, a bound varies, some index is out of range)."""
    R = self.R
    if T.ndim != R + 1 or any(n != 1 for n in T.shape[:R]): return None
    lo = hi = aff.const
    shape, strides = [1] * R, [0] * R
    flat = T.reshape(T.shape[R:])
    step = flat.strides[0]
    for d, c in aff.coefs.items():
      n = self.loop_sizes[d]
      if n == 0 or self.plan.loop_nodes[d] in self.fixed or self.varying >> d & 1: return None
      span = c * (n - 1)
      lo, hi = lo + min(span, 0), hi + max(span, 0)
      shape[d], strides[d] = n, c * step
    if aff.vec is not None:
      start, vstep, k = aff.vec
      span = vstep * (k - 1)
      lo, hi = lo + start + min(span, 0), hi + start + max(span, 0)
      shape.append(k); strides.append(vstep * step)
    if lo < 0 or hi >= flat.shape[0]: return None
    base = aff.const + (aff.vec[0] if aff.vec is not None else 0)
    return strided(flat, base, shape, strides, writeable=False)

  def out_of_bounds(self, i, node, idxs, bad, what, store=None):
    """strict_bounds: refuse an ungated out-of-range access, naming the first index tuple."""
    shape = self.m.views[node.src[0]].shape
    arrays = layout(idxs, self.R)
    full = broadcast_shape(bad.shape, *(a.shape for a in arrays))
    bad = np.broadcast_to(bad, full)
    at = tuple(int(x[0]) for x in np.nonzero(bad)) if bad.ndim else ()
    got = tuple(int(np.broadcast_to(a, full)[at]) for a in arrays)
    by = f" by STORE node {store}" if store is not None else ""
    raise EvalError(f"out-of-bounds {what}{by}: index {got} into shape {tuple(shape)} with no gate covering it "
                    "(strict_bounds: decision index-oob would read zero / write nothing here; a compiled kernel must gate it)",
                    i, node.op, rule="eval.oob")

  def check_gated_read(self, i, src, gate):
    gate = truth(gate)
    got = self.oob.pop(src, None)
    if got is not None:
      valid, idxs = got
      g = self.guard(i)
      g = gate if g is None else gate & g
      bad = ~valid & g.reshape(g.shape + (1,) * (valid.ndim - g.ndim))
      if np.any(bad):
        self.out_of_bounds(src, self.m.nodes[src], idxs, bad, "read")
    return gate

  def guard(self, i):
    """Where node i runs: the gates of the IF blocks it is in and the iterations of loops
    with varying bounds. None when it always runs."""
    if not self.kernel: return None
    ifs = self.plan.ifs.get(i)
    var = self.plan.axes.get(i, 0) & self.varying
    if not ifs and not var: return None
    g = None
    for f in ifs or ():
      gv = self.if_gate[f]
      g = gv if g is None else g & gv
    d = 0
    while var:
      if var & 1:
        g = self.valid_of[d] if g is None else g & self.valid_of[d]
      var >>= 1; d += 1
    return g

  def loop_validity(self, ranges):
    g = None
    for r in ranges:
      d = self.plan.axis_of[r]
      if self.varying >> d & 1: g = self.valid_of[d] if g is None else g & self.valid_of[d]
    return g

  def full_along(self, ranges, *arrays):
    dims = [self.plan.axis_of[r] for r in ranges]
    out = []
    for a in arrays:
      shp = list(a.shape)
      for d in dims: shp[d] = self.loop_sizes[d]
      out.append(np.broadcast_to(a, tuple(shp)))
    return out

  # ---------------------------------------------------------------- writes and order
  def store(self, ctx, mode):
    i, node = ctx.i, ctx.node
    t = node.src[0]
    st = self.storage(self.plan.root[t])
    path = self.runtime_path(t, affine=i not in self.plan.reductions)
    gate = truth(self.values[node.src[2]]) if len(node.src) > 2 and mode == "set" else None
    g = self.guard(i)
    if g is not None: gate = g if gate is None else gate & g
    if self.kernel and self.m.strict_bounds: self.check_write(i, path, gate)
    if i in self.plan.reductions: write = loops.reduction_write(self, i, path, gate)
    else: write = Write(i, [(k, d) for k, d, _ in path], self.values[node.src[1]], gate, mode)
    self.new_version(ctx, i, st, write)
    return None

  def new_version(self, ctx, i, st, write):
    ver = Version(st, (ctx.eff or {}).get(st.key) or st.base, write)
    if self.R == 0: self.held[i] = self.materialize(ver, 0, i)   # tensor level: apply now, keep while needed
    ctx.eff = dict(ctx.eff or {})
    ctx.eff[st.key] = ver

  def check_write(self, i, path, gate):
    """strict_bounds: an ungated write must be in bounds (a gated one may not be, where the
    gate is false). Without it an out-of-range write writes nothing (storage.apply_write)."""
    nodes = self.m.nodes
    for kind, data, link in path:
      if kind != "index": continue
      shape = self.m.views[nodes[link].src[0]].shape
      bad = None
      for j, a in enumerate(layout(data, self.R)):
        b = (a < 0) | (a >= shape[j])
        bad = b if bad is None else bad | b
      if bad is None or not np.any(bad): continue
      if gate is not None: bad = bad & gate.reshape(gate.shape + (1,) * (bad.ndim - gate.ndim))
      if np.any(bad): self.out_of_bounds(link, nodes[link], data, bad, "write", store=i)

  def after(self, ctx):
    i, node = ctx.i, ctx.node
    if i not in self.plan.root: return self.after_view(ctx)
    st = self.storage(self.plan.root[i])
    ver = self.override.get(i)
    if ver is not None:
      ctx.eff = dict(ctx.eff or {})
      ctx.eff[st.key] = ver
    else:
      ver = (ctx.eff or {}).get(st.key) or st.base
    if i not in self.plan.read: return None
    x = self.materialize(ver, self.plan.axes.get(i, 0), i)
    for link in self.plan.chain_links(node.src[0]):   # the chain below the AFTER, replayed on this version
      n = self.m.nodes[link]
      r = role(n.op)
      if r == "through" and len(n.src) > 1: x = self.read_index(link, x, self.index_values(link))
      elif r == "view": x = byte_view(x, self.R, n.arg["offset"], n.arg["size"], NP[n.arg["dtype"]])
    return x

  def after_view(self, ctx):
    """AFTER of movement ops over storage (tinygrad's AFTER(RESHAPE(buf), STORE(buf, v)),
    and AFTER(AFTER(RESHAPE(buf), STORE), STORE) of a buffer assigned twice): the storage
    as its deps leave it (every AFTER's, merged in ctx.eff), seen through the same movement
    ops; AFTER of any other value passes it through."""
    m, nodes = self.m, self.m.nodes
    chain, j = [], ctx.node.src[0]
    while j not in self.plan.root:
      if role(nodes[j].op) == "after": j = nodes[j].src[0]
      elif m.T.ops[nodes[j].op].category == "movement" and role(nodes[j].op) is None: chain.append(j); j = nodes[j].src[0]
      else: break
    if j not in self.plan.root or not chain: return ctx.value(0)
    st = self.storage(self.plan.root[j])
    ver = (ctx.eff or {}).get(st.key) or st.base
    x = self.materialize(ver, 0, ctx.i)
    for link in self.plan.chain_links(j):
      n = nodes[link]
      if role(n.op) == "through" and len(n.src) > 1: x = self.read_index(link, x, [self.values[k] for k in n.src[1:]])
      elif role(n.op) == "view": x = byte_view(x, self.R, n.arg["offset"], n.arg["size"], NP[n.arg["dtype"]])
    for k in reversed(chain):   # the movement ops, innermost first
      x = UNITS[nodes[k].op].fn(NodeCtx(self, k, None), x, *[self.values.get(s) for s in nodes[k].src[1:]])
    return x

  def loop_axis(self, i, bound):
    d = self.plan.axis_of[i]
    b = np.asarray(bound)
    if b.size == 1: n = max(int(b.reshape(-1)[0]), 0)
    else:
      n = max(int(b.max()), 0) if b.size else 0
    self.m.budget.need(n * 8, i, self.m.nodes[i].op, "its iterations")
    it = np.arange(n, dtype=np.int64).reshape((1,) * d + (n,) + (1,) * (self.R - d - 1))
    if b.size > 1:
      self.valid_of[d] = it < b
      self.varying |= 1 << d
    self.loop_sizes[d] = n
    return it

  def open_if(self, i, gate):
    self.if_gate[i] = truth(gate)

  def end(self, ctx):
    if ctx.i in self.plan.sequential: loops.run_stepped(self, ctx)
    return None

  def call(self, ctx):
    node = ctx.node
    m = self.m
    body = node.src[0]
    bop = m.nodes[body].op
    args = [ctx.value(k) for k in range(1, len(node.src))]
    if bop == "TUPLE":
      value, body_eff = m.run_function(body, args)
      if body_eff: ctx.eff = merge_effects([ctx.eff, {k: v for k, v in body_eff.items() if isinstance(k, str)}])
      return value
    results = m.run_kernel(body, args, ctx.i)
    for slot, arr in sorted(results.items()):
      a = node.src[slot + 1]
      if a not in self.plan.root: continue   # a computed argument: what the kernel wrote there is dropped
      st = self.storage(self.plan.root[a])
      path = [(k, d) for k, d, _ in self.runtime_path(a)]
      self.new_version(ctx, ctx.i, st, Write(ctx.i, path, arr.reshape((1,) * self.R + arr.shape)))
    return None
