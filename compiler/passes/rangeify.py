"""Stage 2, rangeify: decide the kernel split and break every tensor down to shape ().

Which values get a buffer of their own ("realized"):
  * the program's value roots, and the non-storage arguments of kernel CALLs;
  * the ops in render.yaml `schedule.realize` (CONTIGUOUS, LOAD, COPY);
  * an *expensive* value (one whose inlined computation contains a REDUCE) that would
    otherwise be computed more than once: it has several data consumers, or a consumer
    broadcasts it (EXPAND, an elementwise op with a larger shape, a gather).
  (except, where the device's heuristics give `fuse_rows` (GPUs), a row reduction whose
  row is short enough and whose every consumer indexes the same rows: softmax's max and
  sum, layer norm's mean and variance stay in the kernel of the elementwise work that
  reads them, computed once per row there; _row_fused);
Everything else is inlined into the kernel that needs it: elementwise chains fuse with
their reduce, and a reduce fuses with the elementwise ops after it, so
`((a+b)*c).sum()` is one kernel. Cheap shared values (elementwise over loads) are
recomputed rather than stored, which costs less memory traffic than a round trip; the
schedule's meta counts them (`recomputed`).

Each realized value and each tensor STORE becomes a kernel: a SINK over PARAMs in which
the output is written element by element, `STORE(INDEX(out, r0, r1...), value)` closed
by `END(..., r0, r1...)`. Reading a tensor at an index tuple turns movement ops into
index arithmetic (compiler/passes/readers.py): PERMUTE reorders, FLIP reflects,
RESHAPE flattens and splits, EXPAND pins broadcast axes to 0, SHRINK shifts, PAD shifts
and masks (`WHERE(valid, x, 0)`: decision pad-fill), INDEX reads its index operands and
masks out-of-range ones (decision index-oob), STACK selects, REDUCE opens RANGEs of type
REDUCE. Storage reads are `INDEX(PARAM, i...)`, whose out-of-range reads are zero by
the same decision: the renderer proves them in bounds or guards them.

Devices: every device of the program (n-tuple devices included) is the one device the
kernels run on, so a COPY or device LOAD is a copy kernel and an n-tuple buffer is held
whole (decided in docs: compiler section of the README).
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.tables import tables
from tinyspec.rewrite import Pat, Rule, RuleSet, substitute
from tinyspec.walk import drive
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.schedule import Kernel, Output, Schedule, overlap
from tinyspec.compiler.rendertables import policy, is_alu
from tinyspec.compiler.analysis.symbolic import simplify
from tinyspec.compiler.passes.gates import gate_memory
from tinyspec.compiler.passes.readers import ZERO, TRUE, numel, and_, in_range, as_index, reader

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)

# ------------------------------------------------------------------ one kernel
class KernelBuilder:
  def __init__(self, rz: "Rangeify"):
    self.rz = rz
    self.params: dict[UOp, UOp] = {}
    self.args: list[UOp] = []
    self.memo: dict = {}
    self.nrange = 0
    self.redirect: dict[UOp, UOp] = {}

  def new_range(self, n: int, kind: str) -> UOp:
    r = UOp("RANGE", (const(n, "index"),), {"id": self.nrange, "type": kind})
    self.nrange += 1
    return r

  def output_index(self, shape) -> tuple[tuple, list]:
    idx, ranges = [], []
    for d in shape:
      if d == 1: idx.append(ZERO); continue
      r = self.new_range(d, "LOOP")
      idx.append(r); ranges.append(r)
    return tuple(idx), ranges

  def param(self, storage: UOp, write: bool = False) -> UOp:
    if not write: storage = self.redirect.get(storage, storage)
    p = self.params.get(storage)
    if p is not None: return p
    pr = props(storage)
    slot = len(self.args)
    if storage.op == "PARAM" and len(storage.src) == 3:   # a symbolic size: passed by value with its bounds
      lo, hi = props(storage.src[1]).min_max[0], props(storage.src[2]).min_max[1]
      srcs = (shape_operand(()), const(lo, pr.dtype), const(hi, pr.dtype))
    else:
      srcs = (shape_operand(pr.shape),)
    p = UOp("PARAM", srcs, {"slot": slot, "dtype": pr.dtype})
    self.params[storage] = p
    self.args.append(storage)
    return p

  def read(self, storage: UOp, idx: tuple) -> UOp:
    p = self.param(storage)
    return UOp("INDEX", (p, *idx)) if idx else p

  def leaf(self, x: UOp, idx: tuple):
    s = self.rz.realized.get(x)
    if s is not None: return self.read(s, idx)
    if self.rz.is_storage(x): return self.read(x, idx)
    if x.op == "CONST": return x
    return None

  def value(self, x: UOp, idx: tuple, expand_top: bool = False) -> UOp:
    """The kernel-level scalar of tensor x at index tuple idx."""
    key = (x, idx)
    if key in self.memo: return self.memo[key]
    if x.op == "CONST": return x
    if not expand_top and (lf := self.leaf(x, idx)) is not None:
      self.memo[key] = lf; return lf
    def start(k):   # a leaf's value, or the generator of its reader (the top one's always, for expand_top)
      lf = None if k is key else self.leaf(*k)
      return lf if lf is not None else self._gen(*k)
    return drive(key, start, self.memo)

  def _gen(self, x: UOp, idx: tuple):
    r = reader(x.op)
    if r is None: raise CompileError("compile.unsupported", f"{x.op} cannot be lowered into a kernel", x)
    return r(self, x, idx)


# ------------------------------------------------------------------ the kernel split
def _data_srcs(u: UOp) -> list[UOp]:
  """Sources that are data (not shape operands, not ordering deps)."""
  od = tables().ops[u.op]
  out = []
  for k, s in enumerate(u.src):
    if od.slot_for(k).kind in ("shape", "range", "void"): continue
    if u.op == "AFTER" and k > 0: continue
    out.append(s)
  return out


def _expanding(s: UOp, u: UOp) -> bool:
  """Does consumer u read source s more than once per element of s?"""
  if u.op == "EXPAND" or is_alu(u.op): return numel(props(u).shape) > numel(props(s).shape)
  if u.op == "INDEX": return numel(props(u).shape) > (1 if s is u.src[0] else numel(props(s).shape))
  return False


def _kernel_sink_slots(body: UOp) -> set[int]:
  """PARAM slots a kernel body stores to."""
  out = set()
  for u in toposort(body):
    if u.op in WRITES:
      t = u.src[0]
      while t.op in ("INDEX", "AFTER"): t = t.src[0]
      if t.op == "PARAM": out.add(t.arg["slot"])
  return out


def _tensor_nodes(roots: list[UOp]) -> list[UOp]:
  """Toposort of the tensor-level nodes: kernel bodies under CALL are not entered."""
  def srcs(u): return u.src if _kernel_body(u) is None else tuple(s for k, s in enumerate(u.src) if k not in tables().body_slots(u.op))
  return toposort(roots, srcs=srcs)


def _masked_read(x: UOp, g: UOp, i: UOp, z: UOp):
  """A masked storage read becomes a gated LOAD: the read is skipped, not just discarded."""
  return UOp("LOAD", (i, z, g)) if (z.arg["value"] in (0, False) and i.src[0].op == "PARAM" and props(g).dtype == "bool") else None


LOWER = RuleSet([Rule("masked_read", Pat("WHERE", (Pat.var("g"), Pat("INDEX", name="i"), Pat.cvar("z")), name="x"), _masked_read)], "lower")


class Rangeify:
  def __init__(self, roots: list[UOp], fuse_rows: int | None = None):
    self.fuse_rows = fuse_rows     # the longest row a row reduction may have to stay in its consumers' kernel (None: never)
    self.storage_ops = tables().storage_ops | policy("constant_storage")   # ops.yaml `storage: true`, and constant data read like it
    self.snapshots: dict[UOp, UOp] = {}
    self._base_slot = max((u.arg["slot"] for u in _tensor_nodes(roots) if u.op == "BUFFER"), default=-1) + 1
    roots = self._snapshot_base_reads(list(roots))
    self.roots = roots
    self.nodes = _tensor_nodes(roots)
    self.realized: dict[UOp, UOp] = {}
    self.kernels: list[Kernel] = []
    self.intermediates: set = set(self.snapshots.values())
    slots = [u.arg["slot"] for u in self.nodes if u.op == "BUFFER"]
    self.next_slot = max(slots, default=-1) + 1
    devs = [props(u).device for u in self.nodes if u.op == "BUFFER"]
    self.default_device = next((d for d in devs if d is not None), "CPU")
    self.names: dict[str, int] = {}
    self.recomputed = 0
    self.fused_rows = 0

  def is_storage(self, x: UOp) -> bool:
    return x.op in self.storage_ops

  # -- reads of a buffer's contents before the program's stores
  def _snapshot_base_reads(self, roots: list[UOp]) -> list[UOp]:
    """A plain read of storage B (not through AFTER(B, store)) sees B as it was before the
    program stored to it, whatever order things run in (refimpl's storage versions). When
    B is stored to, such reads go to a copy of B made first (`snapshots`), except in the
    common in-place case: one STORE to B whose own value (or gate) holds every plain read."""
    nodes = _tensor_nodes(roots)
    stores: dict[UOp, list[UOp]] = {}
    for u in nodes:
      if u.op == "STORE":
        st, _ = self._target_chain(u.src[0])
        stores.setdefault(st, []).append(u)
    if not stores: return roots
    reads: dict[UOp, set] = {}     # B -> consumers reading it plainly
    for u, _k, b in self._plain_edges(roots):
      if b in stores: reads.setdefault(b, set()).add(u)
    need = []
    for b, users in reads.items():
      sts = stores[b]
      if len(sts) == 1:
        inside = {x for x in _tensor_nodes(list(sts[0].src[1:]))}
        if users <= inside: continue
      need.append(b)
    if not need: return roots
    for b in need:
      pr = props(b)
      snap = UOp("BUFFER", (shape_operand(pr.shape),), {"slot": self._base_slot, "dtype": pr.dtype, "device": pr.device if not isinstance(pr.device, tuple) or pr.shape and pr.shape[0] % len(pr.device) == 0 else pr.device[0]})
      self._base_slot += 1
      self.snapshots[b] = snap
    return self._redirect_plain(roots, {b: self.snapshots[b] for b in need})

  def _plain_edges(self, roots):
    """(consumer, src index, storage) for every edge that reads a storage's base contents:
    not a STORE's target chain, not the buffer of an AFTER (that reads what was stored)."""
    out = []
    for u, ctx in self._walk_ctx(roots):
      if ctx != "value": continue
      for k, s in enumerate(u.src):
        if self.is_storage(s) and self._edge_ctx(u, k) == "value": out.append((u, k, s))
    return out

  def _edge_ctx(self, u: UOp, k: int) -> str:
    if u.op == "STORE" and k == 0: return "target"
    if u.op == "AFTER" and k == 0: return "live"
    if k in tables().body_slots(u.op): return "body"
    if u.op == "BUFFER_VIEW": return "live"
    return "value"

  def _child_ctx(self, u: UOp, k: int, ctx: str) -> str:
    """The context of u's source k when u is in context ctx: a target or live chain goes
    on through the buffer of INDEX/AFTER and through markers; elsewhere the edge decides."""
    if ctx != "value" and ((u.op in ("INDEX", "AFTER") and k == 0) or u.op in policy("transparent") | tables().marker_ops): return ctx
    return self._edge_ctx(u, k)

  def _walk_ctx(self, roots):
    """Every (node, context) reachable; a context is value, target (a STORE's destination
    chain) or live (under AFTER's buffer: its stored contents)."""
    seen, out = set(), []
    stack = [(r, "value") for r in roots]
    while stack:
      u, ctx = stack.pop()
      if (u, ctx) in seen: continue
      seen.add((u, ctx)); out.append((u, ctx))
      for k, s in enumerate(u.src):
        nctx = self._child_ctx(u, k, ctx)
        if nctx != "body": stack.append((s, nctx))
    return out

  def _redirect_plain(self, roots, mapping: dict) -> list[UOp]:
    """Rebuild the graph with value-context reads of mapping's storages replaced."""
    memo: dict = {}
    def build(u, ctx):
      stack = [(u, ctx, False)]
      while stack:
        x, c, done = stack.pop()
        if (x, c) in memo: continue
        kids = []
        for k, s in enumerate(x.src): kids.append((s, self._child_ctx(x, k, c)))
        if not done:
          stack.append((x, c, True))
          stack.extend((s, nc, False) for s, nc in kids if nc != "body" and (s, nc) not in memo)
          continue
        if c == "value" and x in mapping: memo[(x, c)] = mapping[x]; continue
        new = tuple(s if nc == "body" else memo[(s, nc)] for s, nc in kids)
        memo[(x, c)] = x if all(a is b for a, b in zip(new, x.src)) else x.replace(src=new)
      return memo[(u, ctx)]
    return [build(r, "value") for r in roots]

  # -- which values get a buffer
  def plan(self) -> set:
    cons: dict[UOp, list[UOp]] = {u: [] for u in self.nodes}
    for u in self.nodes:
      for s in dict.fromkeys(_data_srcs(u)):
        if s in cons: cons[s].append(u)
    realize, expensive = set(), {}
    always = policy("realize")
    for u in self.nodes:
      if self.is_storage(u) or u.op == "CONST" or props(u).dtype == "void" or isinstance(props(u).dtype, tuple):
        expensive[u] = False; continue
      if self._row_fused(u, cons):   # computed once per row inside the kernel that reads it
        expensive[u] = False; self.fused_rows += 1; continue
      exp = u.op == "REDUCE" or any(expensive.get(s, False) and s not in realize for s in _data_srcs(u))
      expensive[u] = exp
      if u.op in always: realize.add(u)
      elif exp and (len(cons[u]) > 1 or any(_expanding(u, c) for c in cons[u])): realize.add(u)
      elif u.op in policy("realize_broadcast") and self._broadcast_later(u, cons): realize.add(u)
      elif len(cons[u]) > 1 and not self.is_storage(u): self.recomputed += 1
    for u in self.nodes:
      if (body := _kernel_body(u)) is not None:
        by_value = _size_slots(body)
        for k, a in enumerate(u.src[1:]):
          if a.op == "CONST" and k in by_value: continue   # a constant size is passed by value
          if self._storage_of(a) is None: realize.add(a)
    for r in self.roots:
      for e in (r.src if r.op == "TUPLE" else (r,)):
        pr = props(e)
        if isinstance(pr.dtype, tuple): raise CompileError("compile.tuple_root", f"root {r.op} holds a nested tuple", r)
        if pr.dtype != "void" and self._storage_of(e) is None: realize.add(e)
    return realize

  def _row_fused(self, u: UOp, cons: dict) -> bool:
    """Does row reduction u stay inside the kernel of its consumers (`fuse_rows`)? It
    does when its row (the one reduced axis) has at most `fuse_rows` elements and everything
    computed from it, up to the program's values, indexes the same rows: elementwise ops
    and EXPANDs that broadcast only along the reduced axes, and REDUCEs over some of those
    axes, and the reduced axes are the innermost (a column reduction is not a row). Every
    kernel reading u then iterates u's rows as its outer output axes, and u depends on
    those alone: it is computed once per row there (linearize hoists it out of the row's
    inner loops), and the row is read again instead of a buffer round trip."""
    if self.fuse_rows is None or u.op != "REDUCE": return False
    axes, shape = set(u.arg.get("axes", ())), props(u.src[0]).shape
    # one reduced axis: a REDUCE over several ranges nested in another's body is a loop
    # nest expand's accumulators do not yet close correctly (RANGE closed by two ENDs)
    if len(axes) != 1 or numel(shape[a] for a in axes) > self.fuse_rows or len(props(u).shape) != len(shape): return False
    if any(shape[d] > 1 for d in range(min(axes), len(shape)) if d not in axes): return False   # a row is the innermost axes
    def same_rows(x: UOp) -> bool:
      xs = props(x).shape
      return len(xs) == len(shape) and all(xs[d] in (1, shape[d]) if d in axes else xs[d] == shape[d] for d in range(len(shape)))
    stack, seen = [u], {u}
    while stack:
      for c in cons.get(stack.pop(), ()):
        if c in seen: continue
        seen.add(c)
        if not (c.op == "EXPAND" or is_alu(c.op) or (c.op == "REDUCE" and set(c.arg.get("axes", ())) <= axes)) or not same_rows(c): return False
        stack.append(c)
    return True

  def _broadcast_later(self, u: UOp, cons: dict) -> bool:
    """Is u, through movement ops only, read by an EXPAND that repeats it (a padded
    image turned into sliding windows)? Then each element is read many times, and a
    buffer of it beats recomputing its masks at every read."""
    x = u
    while len(cons.get(x, ())) == 1 and x.op not in ("EXPAND",):
      c = cons[x][0]
      if c.op == "EXPAND": return numel(props(c).shape) > numel(props(x).shape)
      if c.op not in ("RESHAPE", "PERMUTE", "SHRINK", "FLIP"): return False
      x = c
    return False

  def _storage_of(self, x: UOp):
    """The storage x reads in full (through AFTER and transparent markers), or None."""
    while x.op == "AFTER" or x.op in policy("transparent"): x = x.src[0]
    return x if self.is_storage(x) else None

  # -- kernels
  def new_buffer(self, like: UOp) -> UOp:
    pr = props(like)
    dev = pr.device if pr.device is not None else self.default_device
    if isinstance(dev, tuple) and not (pr.shape and pr.shape[0] % len(dev) == 0): dev = dev[0]
    b = UOp("BUFFER", (shape_operand(pr.shape),), {"slot": self.next_slot, "dtype": pr.dtype, "device": dev})
    self.next_slot += 1
    self.intermediates.add(b)
    return b

  def _name(self, prefix: str, shape) -> str:
    base = prefix + "_" + "_".join(str(d) for d in shape) if shape else prefix
    n = self.names.get(base, 0)
    self.names[base] = n + 1
    return base if n == 0 else f"{base}n{n}"

  def _finish(self, b: KernelBuilder, effect: UOp, ranges: list, shape, writes: set[int]) -> Kernel:
    body = UOp("END", (effect, *ranges)) if ranges else effect
    sink = gate_memory(simplify(UOp("SINK", (body,)), LOWER))
    sink, args, writes = _prune_params(sink, list(b.args), writes)
    has_reduce = any(u.op == "REDUCE" for u in _walk(sink))
    sink = sink.replace(arg={"name": self._name("r" if has_reduce else "E", shape)})
    k = Kernel(sink, args, writes, sink.arg["name"])
    k.nest = (tuple(shape), tuple(ranges)) if _simple_stores(sink, ranges) else None
    self.kernels.append(k)
    return k

  def value_kernel(self, x: UOp) -> None:
    out = self.new_buffer(x)
    b = KernelBuilder(self)
    p = b.param(out, write=True)
    shape = props(x).shape
    idx, ranges = b.output_index(shape)
    v = b.value(x, idx, expand_top=True)
    self._finish(b, UOp("STORE", (UOp("INDEX", (p, *idx)) if idx else p, v)), ranges, shape, {0})
    self.realized[x] = out

  def store_kernel(self, st: UOp, redirect: dict | None = None) -> None:
    target, val = st.src[0], st.src[1]
    b = KernelBuilder(self)
    if redirect: b.redirect = redirect
    storage, chain = self._target_chain(target)
    p = b.param(storage, write=True)
    shape = props(val).shape
    idx, ranges = b.output_index(shape)
    sidx, valid = self._target_index(b, chain, idx)
    v = b.value(val, idx)
    gate = valid
    if len(st.src) == 3: gate = and_(gate, b.value(st.src[2], ()))
    if not redirect and self._hazard(p, v, gate, sidx):
      snap = self.new_buffer(storage)
      self._copy_kernel(storage, snap)
      return self.store_kernel(st, {storage: snap})
    dst = UOp("INDEX", (p, *sidx)) if sidx else p
    eff = UOp("STORE", (dst, v) if gate is TRUE else (dst, v, gate))
    self._finish(b, eff, ranges, shape, {0})

  def _copy_kernel(self, src: UOp, dst: UOp) -> None:
    b = KernelBuilder(self)
    p = b.param(dst, write=True)
    shape = props(src).shape
    idx, ranges = b.output_index(shape)
    self._finish(b, UOp("STORE", (UOp("INDEX", (p, *idx)) if idx else p, b.read(src, idx))), ranges, shape, {0})

  def _target_chain(self, t: UOp):
    """(the storage a STORE target reaches, the INDEXes on the way, outermost first)."""
    chain = []
    while not self.is_storage(t):
      if t.op == "INDEX": chain.append(t)
      elif not (t.op == "AFTER" or t.op in policy("transparent") | tables().marker_ops): raise CompileError("STORE.target", f"cannot store through {t.op}", t)
      t = t.src[0]
    return t, chain

  def _target_index(self, b: KernelBuilder, chain: list, idx: tuple):
    cur, valid = idx, TRUE
    for ix in chain:
      tshape = props(ix.src[0]).shape
      sidx, pos = [], 0
      for j, i in enumerate(ix.src[1:]):
        if props(i).shape == (): v = b.value(i, ())
        else:
          v = b.value(i, (cur[pos],)); pos += 1
        v = as_index(v)
        sidx.append(v)
        valid = and_(valid, in_range(v, tshape[j]))
      cur = tuple(sidx) + tuple(cur[pos:])
    return cur, valid

  def _hazard(self, p: UOp, v: UOp, gate: UOp, sidx: tuple) -> bool:
    """The kernel reads the storage it writes somewhere other than the element it is
    writing, or writes at data-dependent elements (two iterations may collide)."""
    reads = [u for u in _walk(v, gate) if (u.op == "INDEX" and u.src[0] is p) or u is p]
    if not reads: return False
    ranges = [i for i in sidx if i.op == "RANGE"]
    if not all(i.op in ("RANGE", "CONST") for i in sidx) or len(set(ranges)) != len(ranges): return True
    return any((u is p) if sidx else (u is not p) for u in reads) or \
      any(u is not p and tuple(u.src[1:]) != tuple(sidx) for u in reads)

  def call_kernel(self, c: UOp) -> None:
    body = c.src[0]
    if body.op != "SINK": raise CompileError("compile.unsupported", f"CALL of a {body.op} body", c)
    args, by_value = [], _size_slots(body)
    for k, a in enumerate(c.src[1:]):
      s = a if a.op == "CONST" and k in by_value else self._storage_of(a)
      args.append(s if s is not None else self.realized[a])
    self.kernels.append(Kernel(body, args, _kernel_sink_slots(body), f"user_kernel{len(self.kernels)}"))

  def run(self) -> Schedule:
    for b, snap in self.snapshots.items(): self._copy_kernel(b, snap)    # before anything writes b
    realize = self.plan()
    for u in self.nodes:
      if u.op == "STORE": self.store_kernel(u)
      elif _kernel_body(u) is not None: self.call_kernel(u)
      elif u in realize and u not in self.realized: self.value_kernel(u)
    self.kernels = fuse_horizontal(self.kernels)
    outputs = []
    for k, r in enumerate(self.roots):
      if props(r).dtype == "void": outputs.append(Output("void")); continue
      for j, e in enumerate(r.src if r.op == "TUPLE" else (r,)):
        s = self._storage_of(e)
        outputs.append(Output("value", s if s is not None else self.realized[e], f"out{k}.{j}" if r.op == "TUPLE" else f"out{k}"))
    return Schedule(self.kernels, outputs, self.intermediates, {"recomputed": self.recomputed, "fused_rows": self.fused_rows})


def _kernel_body(u: UOp) -> UOp | None:
  """The kernel u runs: what its body slot (ops.yaml `kind: body`) holds, when that is a
  kernel's SINK rather than a function's TUPLE (None: u runs no kernel)."""
  slots = tables().body_slots(u.op)
  if not slots or len(u.src) <= slots[0] or u.src[slots[0]].op == "TUPLE": return None
  return u.src[slots[0]]


def _size_slots(body: UOp) -> set[int]:
  """The slots of a kernel body's symbolic sizes (PARAMs with bounds: passed by value)."""
  return {u.arg["slot"] for u in _walk(body) if u.op == "PARAM" and len(u.src) == 3}


def _prune_params(sink: UOp, args: list, writes: set):
  """Drop the arguments whose PARAM simplification removed; number the rest 0..n-1."""
  used = sorted({u.arg["slot"] for u in _walk(sink) if u.op == "PARAM"})
  if used == list(range(len(args))): return sink, args, writes
  new = {old: i for i, old in enumerate(used)}
  sink = substitute(sink, {u: u.replace(arg={**u.arg, "slot": new[u.arg["slot"]]}) for u in _walk(sink) if u.op == "PARAM" and new[u.arg["slot"]] != u.arg["slot"]})
  return sink, [args[o] for o in used], {new[w] for w in writes if w in new}


def _simple_stores(sink: UOp, ranges: list) -> bool:
  """Every store of the kernel writes INDEX(PARAM, its output ranges in order) (or a
  ()-shaped PARAM when it has none): the kernels horizontal fusion may merge."""
  body = sink.src[0] if len(sink.src) == 1 else None
  if body is None: return False
  if ranges:
    if body.op != "END" or list(body.src[1:]) != list(ranges): return False
    body = body.src[0]
  stores = list(body.src) if body.op == "GROUP" else [body]
  for st in stores:
    if st.op != "STORE" or len(st.src) != 2: return False
    dst = st.src[0]
    if dst.op == "PARAM": continue
    if dst.op != "INDEX" or dst.src[0].op != "PARAM": return False
    if [i for i in dst.src[1:] if i.op != "CONST"] != list(ranges): return False
  return True


def _merge(a: Kernel, b: Kernel) -> Kernel:
  """One kernel doing a's and b's stores in a's loop nest (same output shape)."""
  args = list(a.args)
  slot_of = {s: i for i, s in enumerate(args)}
  pmap: dict[UOp, UOp] = {}
  a_params = {u.arg["slot"]: u for u in _walk(a.sink) if u.op == "PARAM"}
  for u in _walk(b.sink):
    if u.op != "PARAM": continue
    st = b.args[u.arg["slot"]]
    if st not in slot_of:
      slot_of[st] = len(args); args.append(st)
    ns = slot_of[st]
    pmap[u] = a_params.get(ns) or u.replace(arg={**u.arg, "slot": ns})
  a_ranges = [r for r in a.nest[1]]
  b_ranges = list(b.nest[1])
  rmap = dict(zip(b_ranges, a_ranges))
  top = max((u.arg["id"] for u in _walk(a.sink) if u.op == "RANGE"), default=-1) + 1
  a_red = [u for u in _walk(a.sink) if u.op == "REDUCE"]
  b_red = [u for u in _walk(b.sink) if u.op == "REDUCE"]
  if len(a_red) == 1 and len(b_red) == 1 and [props(r.src[0]).value for r in a_red[0].src[1:]] == [props(r.src[0]).value for r in b_red[0].src[1:]] \
     and [r.arg.get("type") for r in a_red[0].src[1:]] == [r.arg.get("type") for r in b_red[0].src[1:]]:
    rmap.update(zip(b_red[0].src[1:], a_red[0].src[1:]))    # the two reductions share one loop
  for u in _walk(b.sink):
    if u.op == "RANGE" and u not in rmap:
      rmap[u] = u.replace(arg={**u.arg, "id": top}); top += 1
  bsink = substitute(b.sink, {**pmap, **rmap})
  def stores(k_sink, nest_ranges):
    body = k_sink.src[0]
    if nest_ranges: body = body.src[0]
    return list(body.src) if body.op == "GROUP" else [body]
  group = stores(a.sink, a_ranges) + stores(bsink, [rmap[r] for r in b_ranges])
  body = UOp("GROUP", tuple(group))
  if a_ranges: body = UOp("END", (body, *a_ranges))
  k = Kernel(UOp("SINK", (body,), a.sink.arg), args, a.writes | {slot_of[b.args[w]] for w in b.writes}, a.name)
  k.nest = a.nest
  return k


def fuse_horizontal(kernels: list[Kernel]) -> list[Kernel]:
  """Merge each kernel into the latest earlier kernel of the same shape when both are
  simple loop nests and the kernel commutes with every kernel from that one on (it reads
  nothing they write and writes nothing they touch: no byte in common, a view and the
  buffer under it included), so moving it there is invisible."""
  out: list[Kernel] = []
  for k in kernels:
    nest = getattr(k, "nest", None)
    kw = [k.args[w] for w in k.writes]
    target = None
    for j in range(len(out) - 1, -1, -1):
      o = out[j]
      ow = [o.args[w] for w in o.writes]
      if any(overlap(a, b) for a in ow for b in k.args) or any(overlap(a, b) for a in kw for b in o.args): break
      if nest is not None and getattr(o, "nest", None) is not None and o.nest[0] == nest[0]: target = j; break
    if target is None: out.append(k)
    else: out[target] = _merge(out[target], k)
  return out


def _walk(*roots): return toposort(list(roots))


def rangeify(roots: list[UOp], fuse_rows: int | None = None) -> Schedule:
  """fuse_rows: see Rangeify._row_fused (None: every row reduction that is read more than
  once or broadcast gets a buffer)."""
  return Rangeify(list(roots), fuse_rows).run()
