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
the tile's own ranges. Where W does not divide N, Bp has ceil(N / W) column tiles and the
last one's missing columns are zeros (what the padded tile read there: decision
index-oob), so the tile's reads are in bounds, ungated, whole vectors.

Padded outputs (`pad_outputs`): a reduce kernel's tile padded past the output's edge
(PADTO) stores under its validity gate `n < N`, lane by lane, which keeps the whole tile
from becoming vector code. Where that gate says exactly "the index is in bounds", the kernel instead stores
every element ungated into a padded intermediate (its rows and columns to the tile's
edge) and a copy kernel right after it writes the output's part: the same elements, an
O(M*N) pass against the O(M*K*N) product. The inputs such a kernel reads past their high
edge (a padded row of A) are copied first into buffers padded with zeros to the edge it
reads: what those reads gave (decision index-oob), now in bounds and ungated.
"""
from __future__ import annotations
from tinyspec.tables import tables
from tinyspec.uop import UOp, toposort
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite
from tinyspec.compiler.schedule import Kernel, Schedule
from tinyspec.compiler.analysis.symbolic import linear, simplify, exact_linear, linear_interval
from tinyspec.compiler.passes.heuristics import numbers, default_opts
from tinyspec.compiler.analysis.axes import axis_type, size
from tinyspec.compiler.passes.optimize import initial_types, apply_opts
from tinyspec.compiler.passes.rangeify import _prune_params
from tinyspec.compiler.passes.steps import Env, KernelRule, ScheduleContext, rewrite_schedule

WRITES = tables().write_ops   # STORE, ATOMICADD (ops.yaml `storage: writes`)


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


def _stores(nodes: list) -> dict[UOp, list[UOp]]:
  """The storage each STORE / ATOMICADD of the kernel writes -> those writes."""
  out: dict[UOp, list[UOp]] = {}
  for u in nodes:
    if u.op in WRITES:
      t = u.src[0]
      while t.op in ("INDEX", "AFTER"): t = t.src[0]
      out.setdefault(t, []).append(u)
  return out


def candidates(sink: UOp, min_elems: int, lanes: int) -> list[tuple[UOp, int]]:
  """(INDEX, W) of the reads worth packing (see the module doc)."""
  written = set(_stores(toposort(sink)))     # (a read of what the kernel writes is never a snapshot)
  out = []
  for u in toposort(sink):
    if u.op != "INDEX" or u.src[0].op != "PARAM" or u.src[0] in written or len(u.src) != 3: continue
    K, N = props(u.src[0]).shape
    if K * N < min_elems: continue
    w = _lane_block(u.src[2])
    if w is None or w < lanes or w >= N: continue
    if _lane_block(u.src[1]) is not None or not _reduce_stride(u.src[1]): continue
    out.append((u, w))
  return out


def _loops(sizes, first_id: int) -> list[UOp]:
  return [UOp("RANGE", (const(n, "index"),), {"id": first_id + i, "type": "LOOP"}) for i, n in enumerate(sizes)]


def _at(r: UOp, offset: int) -> UOp:
  return UOp("ADD", (r, const(offset, "index"))) if offset else r


def _pack_kernels(src_shape, w: int, dtype: str, name: str) -> list[UOp]:
  """Bp[a, k, j] = B[k, a*w + j], a < ceil(N / w): the columns past N are zeros (what the
  padded tile read there before: decision index-oob). No read under a condition (a gated
  read keeps a loop from becoming vector code): one kernel copies the whole tiles, and
  where w does not divide N another copies the last tile's columns and writes its zeros."""
  K, N = src_shape
  A, full, rest = -(-N // w), N // w, N % w
  out = UOp("PARAM", (shape_operand((A, K, w)),), {"slot": 0, "dtype": dtype})
  inp = UOp("PARAM", (shape_operand((K, N)),), {"slot": 1, "dtype": dtype})
  def nest(a_size, j_size, a_at, j_at, zero: bool):
    rs = _loops((a_size, K, j_size), 3 * zero)      # (a kernel's loops: distinct ids)
    a, k, j = _at(rs[0], a_at), rs[1], rs[2]
    col = UOp("ADD", (UOp("MUL", (a, const(w, "index"))), j))
    v = const(0, dtype) if zero else UOp("INDEX", (inp, k, col))
    return UOp("END", (UOp("STORE", (UOp("INDEX", (out, a, k, _at(j, j_at))), v)), *rs))
  sinks = [UOp("SINK", (nest(full, w, 0, 0, False),), {"name": name})] if full else []
  if rest: sinks.append(UOp("SINK", (nest(1, rest, full, 0, False), nest(1, w - rest, full, rest, True)), {"name": f"{name}_edge"}))
  return sinks


def packed_read(x: UOp, ctx: dict):
  """A read worth packing (candidates) -> the same element of the packed copy."""
  return ctx.get(x)


PACKED = RuleSet([Rule("packed_read", Pat("INDEX", name="x"), packed_read)], "pack")


def pack_inputs(k: Kernel, ctx: ScheduleContext):
  """The packing kernels the kernel wants (kernels already optimized) before it, and the
  kernel reading the packed copies; None when it wants none."""
  target, dev = ctx.env.target, ctx.env.dev
  H = numbers(dev)
  if not H.get("pack") or k.sink.op != "SINK": return None
  lanes = max(1, dev.vector_bytes // 4)
  found = candidates(k.sink, H["pack_min"], lanes)
  if not found: return None
  out: list[Kernel] = []
  args, subs = list(k.args), {}
  for n, (idx, w) in enumerate(found):
    p = idx.src[0]
    pr = props(p)
    Kd, Nd = pr.shape
    shape = (-(-Nd // w), Kd, w)     # column tiles, the last one padded with zeros where w does not divide N
    buf, q = _intermediate(shape, pr, args, p, ctx)
    for e, psink in enumerate(_pack_kernels((Kd, Nd), w, pr.dtype, f"pack_{Kd}_{Nd}")):
      psink = initial_types(psink)
      psink = apply_opts(psink, default_opts(psink, target, dev), target, dev)
      out.append(Kernel(psink, [buf, args[p.arg["slot"]]], {0}, f"{k.name}_pack{n}" + ("_edge" if e else "")))
    args.append(buf)
    i_k, i_n = idx.src[1], idx.src[2]
    subs[idx] = UOp("INDEX", (q, UOp("IDIV", (i_n, const(w, "index"))), i_k, UOp("MOD", (i_n, const(w, "index")))))
  sink = simplify(graph_rewrite(k.sink, PACKED, subs, top_down=True, once=True))
  sink, args, writes = _prune_params(sink, args, set(k.writes))
  return out + [Kernel(sink, args, writes, k.name)]


PACK = (KernelRule("pack_inputs", pack_inputs),)


def pack(sched: Schedule, target: str, dev) -> Schedule:
  """Insert the packing kernels the schedule's kernels want (kernels already optimized)."""
  return rewrite_schedule(sched, PACK, Env(target, dev))


def _conjuncts(g: UOp) -> list[UOp]:
  return _conjuncts(g.src[0]) + _conjuncts(g.src[1]) if g.op == "AND" else [g]


def _bound_dim(c: UOp, ii: list, shape) -> int | None:
  """The dim d whose bound the gate conjunct c states exactly, else None: c is
  CMPLT(e, C) and i_d = k*e + rest with rest in [0, k) and k*C = shape[d], so that
  e < C exactly when i_d < shape[d] (the split of a padded axis: t < 125 for t*8 + r)."""
  if c.op != "CMPLT" or c.src[1].op != "CONST": return None
  C = int(c.src[1].arg["value"])
  le = exact_linear(c.src[0])
  if le is None or not le[0]: return None
  t0, k0 = next(iter(le[0].items()))
  for d, (i, n) in enumerate(zip(ii, shape)):
    li = exact_linear(i)
    if li is None or li[0].get(t0, 0) % k0: continue
    k = li[0].get(t0, 0) // k0
    if k <= 0 or k * C != n or any(li[0].get(t) != k * ke for t, ke in le[0].items()): continue
    rest = linear_interval({t: ki for t, ki in li[0].items() if t not in le[0]}, li[1] - k * le[1])
    if rest is not None and rest[0] >= 0 and rest[1] < k: return d
  return None


def _covers(ii: list, shape) -> bool:
  """Do the indices ii, over their loops, reach every element of `shape`? Each is a
  mixed-radix sum of constant-size RANGEs (coefficients 1, n1, n1*n2, ...: every value
  from 0 to the product minus one, each once), with no RANGE in two of them: then the
  loops visit their whole product, which holds every element. An index of data (a
  scatter) or of a constant (one row) reaches only some."""
  used: set = set()
  for i, n in zip(ii, shape):
    lf = exact_linear(i)
    if lf is None or lf[1] != 0: return False
    terms = sorted(lf[0].items(), key=lambda tk: tk[1])
    reach = 1
    for t, k in terms:
      if t.op != "RANGE" or t in used or k != reach or size(t) is None: return False
      used.add(t)
      reach *= size(t)
    if reach < n: return False
  return True


def _padded_shape(st: UOp) -> tuple | None:
  """The padded shape an output STORE could write ungated, or None: the store is
  STORE(INDEX(PARAM, i...), v, gate) where every conjunct of the gate states exactly the
  upper bound of one dim (_bound_dim, each dim once), every other index is in bounds and
  no index is ever negative; a false gate then means an index out of bounds, so storing
  there too (in the padded buffer) changes no element of the output. And its loops
  store every element of the output (_covers): the copy after the kernel writes every
  element, which must then be one the kernel stored (an element it leaves alone keeps
  what it held before)."""
  if len(st.src) != 3 or st.src[0].op != "INDEX" or st.src[0].src[0].op != "PARAM": return None
  idx = st.src[0]
  shape = props(idx.src[0]).shape
  ii = list(idx.src[1:])
  if len(ii) != len(shape) or props(st.src[1]).shape or not _covers(ii, shape): return None
  bound = set()
  for c in _conjuncts(st.src[2]):
    d = _bound_dim(c, ii, shape)
    if d is None or d in bound: return None
    bound.add(d)
  out = []
  for d, (i, n) in enumerate(zip(ii, shape)):
    lo, hi = props(i).min_max
    if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0: return None
    if d not in bound and hi >= n: return None
    out.append(max(n, hi + 1) if d in bound else n)
  return tuple(out) if bound else None


def _of_loops(i: UOp) -> bool:
  """Is index i a function of constant-size loops alone (no data, no symbolic size)?
  Then its interval is the loops' shape; an index of data has its dtype's whole range."""
  for u in toposort(i):
    if u.op in ("RANGE", "SPECIAL"):
      if u.src[0].op != "CONST": return False
    elif u.op in ("INDEX", "LOAD") or (not u.src and u.op not in ("CONST", "VCONST")): return False
  return True


def _read_padding(p: UOp, nodes: list) -> tuple | None:
  """The shape p's reads reach when some go past its high edge and none below 0, else None.
  Only reads indexed by the loops count: a gathered read (an index of data, of any dtype
  and range) reaches what its data says, which the padding must not be sized by; it stays
  guarded, and past p's edge it reads the padding's zeros, as it read zero there before
  (decision index-oob)."""
  shape = props(p).shape
  reach = list(shape)
  for u in nodes:
    if u.op != "INDEX" or u.src[0] is not p: continue
    if len(u.src) - 1 != len(shape): return None
    if not all(_of_loops(i) for i in u.src[1:]): continue
    for d, i in enumerate(u.src[1:]):
      lo, hi = props(i).min_max
      if not isinstance(lo, int) or not isinstance(hi, int) or lo < 0: return None
      reach[d] = max(reach[d], hi + 1)
  return tuple(reach) if tuple(reach) != tuple(shape) else None


def _copy_kernels(shape, src_shape, dtype: str, name: str) -> list[UOp]:
  """out[r...] = src[r...] over out's shape, what src lacks being zeros (decision
  index-oob): one kernel copies the box both have, ungated; where out is larger in some
  dims, another writes the zeros of the rest (a block per such dim)."""
  out = UOp("PARAM", (shape_operand(shape),), {"slot": 0, "dtype": dtype})
  inp = UOp("PARAM", (shape_operand(src_shape),), {"slot": 1, "dtype": dtype})
  common = [min(a, b) for a, b in zip(shape, src_shape)]
  rs = _loops(common, 0)
  sinks = [UOp("SINK", (UOp("END", (UOp("STORE", (UOp("INDEX", (out, *rs)), UOp("INDEX", (inp, *rs)))), *rs)),), {"name": name})]
  zeros = []
  for d in (d for d in range(len(shape)) if shape[d] > common[d]):    # dims before d within the box, d past it, dims after it whole
    rs = _loops([common[e] for e in range(d)] + [shape[d] - common[d]] + list(shape[d + 1:]), d * len(shape))
    at = [_at(r, common[d]) if e == d else r for e, r in enumerate(rs)]
    zeros.append(UOp("END", (UOp("STORE", (UOp("INDEX", (out, *at)), const(0, dtype))), *rs)))
  if zeros: sinks.append(UOp("SINK", tuple(zeros), {"name": f"{name}_edge"}))
  return sinks


def _root(storage: UOp) -> UOp:
  while storage.op == "BUFFER_VIEW": storage = storage.src[0]
  return storage


def _intermediate(shape, pr, args: list, p: UOp, ctx: ScheduleContext):
  """(BUFFER, its PARAM in the kernel) of a new intermediate like p's storage, of `shape`."""
  buf = ctx.buffer(shape, pr.dtype, dev_name(args[p.arg["slot"]]))
  return buf, UOp("PARAM", (shape_operand(shape),), {"slot": len(args), "dtype": pr.dtype})


def padded_input(x: UOp, ctx: tuple):
  """An input read past its edge -> its zero-padded copy."""
  return ctx[0].get(x)


def ungated_store(x: UOp, ctx: tuple):
  """A padded output's store -> an ungated store into its padded intermediate."""
  outs = ctx[1]
  if x.src[0].op == "INDEX" and x.src[0].src[0] in outs and len(x.src) == 3:
    return UOp("STORE", (UOp("INDEX", (outs[x.src[0].src[0]], *x.src[0].src[1:])), x.src[1]))
  return None


PADDED = RuleSet([Rule("padded_input", Pat("PARAM", name="x"), padded_input), Rule("ungated_store", Pat("STORE", name="x"), ungated_store)], "pad")


def _copies(shape, src_shape, dtype, name, target, dev) -> list[UOp]:
  out = []
  for c in _copy_kernels(shape, src_shape, dtype, name):
    c = initial_types(c)
    out.append(apply_opts(c, default_opts(c, target, dev), target, dev))
  return out


def pad_output(k: Kernel, ctx: ScheduleContext):
  """A reduce kernel's padded tiles store ungated into padded intermediates, copied out
  after it, and its inputs read past their edge from zero-padded copies made before it
  (module doc, `pad_outputs`); None when it has no such store."""
  target, dev = ctx.env.target, ctx.env.dev
  if not numbers(dev).get("pad_outputs") or k.sink.op != "SINK": return None
  nodes = toposort(k.sink)
  if not any(u.op == "REDUCE" for u in nodes): return None   # the copies pay off against a product's work
  stores = _stores(nodes)
  params = {u for u in nodes if u.op == "PARAM"}
  written = {_root(k.args[p.arg["slot"]]) for p in stores if p.op == "PARAM"}
  shared = {r for r in written if sum(_root(k.args[p.arg["slot"]]) is r for p in params) > 1}   # aliased slots: left alone
  args = list(k.args)
  outs, new_writes, before, after = {}, set(), [], []
  for p, sts in stores.items():
    if p.op != "PARAM" or len(sts) != 1 or sts[0].op != "STORE" or _root(k.args[p.arg["slot"]]) in shared: continue
    if any(u.op == "INDEX" and u.src[0] is p and u is not sts[0].src[0] for u in nodes): continue   # p is read too
    padded = _padded_shape(sts[0])
    if padded is None: continue
    pr = props(p)
    buf, q = _intermediate(padded, pr, args, p, ctx)
    new_writes.add(len(args)); args.append(buf)
    outs[p] = q
    (c,) = _copies(pr.shape, padded, pr.dtype, f"unpad_{'_'.join(map(str, pr.shape))}", target, dev)    # (out within src: no zeros)
    after.append(Kernel(c, [k.args[p.arg["slot"]], buf], {0}, f"{k.name}_unpad{len(after)}"))
  if not outs: return None
  ins = {}
  for p in sorted(params - set(stores), key=lambda p: p.arg["slot"]):
    padded = _read_padding(p, nodes)
    if padded is None or _root(k.args[p.arg["slot"]]) in written: continue
    pr = props(p)
    buf, q = _intermediate(padded, pr, args, p, ctx)
    args.append(buf)
    ins[p] = q
    for e, c in enumerate(_copies(padded, pr.shape, pr.dtype, f"pad_{'_'.join(map(str, pr.shape))}", target, dev)):
      before.append(Kernel(c, [buf, k.args[p.arg["slot"]]], {0}, f"{k.name}_pad{len(ins) - 1}" + ("_edge" if e else "")))
  sink = simplify(graph_rewrite(k.sink, PADDED, (ins, outs), once=True))
  sink, args, writes = _prune_params(sink, args, set(k.writes) | new_writes)
  return before + [Kernel(sink, args, writes, k.name)] + after


def pad_outputs(sched: Schedule, target: str, dev) -> Schedule:
  """Padded tiles store ungated into padded intermediates, and read their inputs from
  zero-padded copies (module doc, `pad_outputs`)."""
  return rewrite_schedule(sched, PAD_OUTPUTS, Env(target, dev))


PAD_OUTPUTS = (KernelRule("pad_output", pad_output),)


def dev_name(storage: UOp):
  d = props(_root(storage)).device
  return d if isinstance(d, str) else "CPU"
