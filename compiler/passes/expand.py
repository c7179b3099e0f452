"""Stage 4, expand: ranges that are not loops any more, and reductions as accumulators.

* UPCAST and UNROLL axes are expanded: a constant-size axis of k iterations becomes k
  copies of the code it encloses (the vector of the Dialect document's "expand the parallel ranges
  into shape", kept as k scalar lanes: C compilers vectorize such lanes when the
  pointers are `restrict` (render.py), OpenCL devices vectorize across work items).
  Under an END the copies are grouped. A REDUCE over an UNROLL axis becomes k REDUCEs
  over its other ranges, one per lane, combined after the loop: k independent
  accumulators (the reduce's float rounding may differ from a sequential loop by the
  reassociation, which ops.yaml `tolerances` allows for REDUCE).
* A REDUCE over GROUP_REDUCE axes reduces in two steps through workgroup memory:

      lbuf    = BUFFER (G,), addrspace LOCAL           G: the group axes' sizes multiplied
      END(STORE(INDEX(lbuf, g), REDUCE(value, other ranges...)), g...)    each g a partial
      bar     = BARRIER(that END)
      result  = REDUCE(INDEX(AFTER(lbuf, bar), g2), g2)                   g2: a new REDUCE axis

  The group axes run in parallel (C: on threads, OpenCL: as the workgroup's work items,
  render.py); the BARRIER orders every partial before the final reduce. Where the
  device's heuristics say `group_combine: tree` (GPUs), the final reduce is instead a
  tree of steps on the work items, a BARRIER after each (_tree_combine).
* A MAX reduction of float32/float64 runs on integers: MAX over the IEEE order key
  (bits XOR 0x7fff.. when negative; -0 < +0) of each value, NaNs first made -inf so that
  they never win. Exactly decision reduce-max (the largest non-NaN element, +0 above -0,
  in any order), and integer MAX vectorizes where a float MAX with NaN and signed-zero
  rules does not.
* Each REDUCE(value, r...) becomes an accumulator (architecture.md "Levels"):

      acc  = BUFFER (), addrspace REG
      init = STORE(AFTER(acc, outer...), identity)        outer: the ranges the REDUCE is inside of
      cur  = AFTER(acc, init, r...)                       the running value, read in the loop
      END(STORE(acc, op(cur, value)), r...)               one loop for the reductions sharing r...
      result = AFTER(acc, END)

  REDUCEs over the same ranges share one loop (END over a GROUP of their updates).
* An END over several ranges becomes nested ENDs of one range each (the loop nest).
The identity is decision reduce-empty's: 0 for ADD, 1 for MUL, the dtype minimum for MAX.
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort, fold_up
from tinyspec.compiler.props import props, const, shape_operand, CompileError
from tinyspec.rewrite import substitute, rebuild
from tinyspec.compiler.analysis.axes import ranges_open
from tinyspec.compiler.analysis.symbolic import simplify, linear
from tinyspec.compiler.tables import render_tables
from tinyspec.compiler.passes.readers import with_identity, identity, fold
from tinyspec.compiler.analysis.axes import depends, open_ranges

UNROLLED = ("UPCAST", "UNROLL")


def combine(op: str, parts: list[UOp]) -> UOp:
  """op over parts as a balanced tree (short dependency chains)."""
  while len(parts) > 1:
    parts = [UOp(op, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
  return parts[0]


def _unroll(sink: UOp, kinds=UNROLLED) -> UOp:
  """Expand every range of the `kinds` into copies (innermost first). A loop closed
  inside a copied body gets a range of its own in each copy (one END per range)."""
  while True:
    nodes = toposort(sink)
    rs = [u for u in nodes if u.op == "RANGE" and u.arg.get("type") in kinds]
    if not rs: return sink
    r = rs[-1]
    if r.src[0].op != "CONST": raise CompileError("compile.form", f"{r.arg['type']} axis {r.arg['id']} needs a constant size", r)
    n = int(r.src[0].arg["value"])
    next_id = max(u.arg["id"] for u in nodes if u.op == "RANGE") + 1
    subs = {}
    for u in nodes:
      if u.op not in ("END", "REDUCE") or r not in u.src[1:]: continue
      rest = tuple(s for s in u.src[1:] if s is not r)
      inner = list(dict.fromkeys(x for e in toposort(u.src[0]) if e.op == "END" for x in e.src[1:]))
      copies = []
      for j in range(n):
        fresh = {}
        if j:
          for x in inner:
            fresh[x] = x.replace(arg={**x.arg, "id": next_id}); next_id += 1
        copies.append(substitute(u.src[0], {r: const(j, "index"), **fresh}))
      if u.op == "REDUCE":
        op, dt = u.arg["op"], props(u).dtype
        if rest and props(u).shape:   # a vector accumulator's lanes run in parallel already: one accumulator
          subs[u] = UOp("REDUCE", (combine(fold(op), copies), *rest), u.arg)
        elif rest: subs[u] = combine(fold(op), [UOp("REDUCE", (c, *rest), u.arg) for c in copies])
        else: subs[u] = with_identity(op, combine(fold(op), copies)) if copies else identity(op, dt)
      else:
        body = UOp("GROUP", tuple(copies)) if len(copies) != 1 else copies[0]
        subs[u] = UOp("END", (body, *rest)) if rest else body
    sink = simplify(substitute(sink, subs))


def _rtype(r: UOp) -> str: return r.arg.get("type", "LOOP")


# ------------------------------------------------------------------ vectors
def lanes(k: int) -> UOp:
  return UOp("VCONST", (), {"values": list(range(k)), "dtype": "index"})


def _flat_coefficient(index: UOp, u: UOp, dep: dict):
  """The coefficient of u in the row-major element offset of INDEX(p, i...), or None
  when some index is not linear in u."""
  shape = props(index.src[0]).shape
  coef, stride = 0, 1
  for i, d in reversed(list(zip(index.src[1:], shape))):
    if depends(i, u, dep):
      lf = linear(i, 32)
      if lf is None or any(t is not u and depends(t, u, dep) for t in lf[0]): return None
      coef += lf[0].get(u, 0) * stride
    stride *= d
  return coef


def _in_bounds(index: UOp) -> bool:
  for i, d in zip(index.src[1:], props(index.src[0]).shape):
    lo, hi = props(i).min_max
    if lo < 0 or hi >= d: return False
  return True


def _vector_storage(p: UOp) -> bool:
  """Storage a vector load or store may address: a PARAM, or a LOCAL buffer (a staged
  tile, compiler/passes/stage.py) seen through AFTERs."""
  while p.op == "AFTER": p = p.src[0]
  return p.op == "PARAM" or (p.op == "BUFFER" and props(p).addrspace == "LOCAL")


def _vectorizable(sink: UOp, u: UOp) -> bool:
  """Can UPCAST axis u become (k,)-vector values (see render.yaml `vectors`)?"""
  V = render_tables()["vectors"]
  dep: dict = {}
  nodes = toposort(sink)
  uses: dict[UOp, list] = {}
  for x in nodes:
    for s in x.src: uses.setdefault(s, []).append(x)
  for x in nodes:
    if x is u or not depends(x, u, dep): continue
    op = x.op
    if op in ("SINK", "GROUP"): continue
    if op == "END" or op == "BARRIER": continue
    if op == "AFTER" and _vector_storage(x): continue    # the tile as ordered after its vector stores
    dt = props(x).dtype
    if dt == "index" and op in ("ADD", "MUL"):
      if op == "MUL" and all(depends(s, u, dep) for s in x.src): return False
      if not all(c.op in ("ADD", "MUL", "INDEX") for c in uses.get(x, ())): return False   # lanes only ever address memory
      continue
    if op == "INDEX":
      if not any(depends(i, u, dep) for i in x.src[1:]): continue   # ordered after a vector store (a shared BARRIER), itself one element
      if not _vector_storage(x.src[0]) or _flat_coefficient(x, u, dep) != 1 or not _in_bounds(x): return False
      if not all((c.op == "STORE" and len(c.src) == 2 and (c.src[0] is x) != (c.src[1] is x)) or (c.op not in ("STORE", "LOAD", "ATOMICADD")) for c in uses.get(x, ())): return False
      continue
    if op == "STORE":
      if x.src[0].op != "INDEX" or len(x.src) != 2 or not depends(x.src[0], u, dep): return False
      continue
    if op == "REDUCE":
      if x.arg["op"] not in V["reduce"] or dt not in V["dtypes"] or any(depends(r, u, dep) or _rtype(r) == "GROUP_REDUCE" for r in x.src[1:]): return False
      continue
    if op not in V["ops"] or dt not in V["dtypes"]: return False
  return True


def _vectorize(sink: UOp) -> UOp:
  """The UPCAST axis contiguous in memory becomes vector lanes, when it can (one axis:
  the others are expanded into copies of the vector code)."""
  V = render_tables()["vectors"]
  cands = [r for r in toposort(sink) if r.op == "RANGE" and _rtype(r) == "UPCAST" and r.src[0].op == "CONST" and int(r.src[0].arg["value"]) in V["widths"]]
  reduced = {r for x in toposort(sink) if x.op == "REDUCE" for r in x.src[1:]}
  for u in sorted(cands, key=lambda r: -int(r.src[0].arg["value"])):
    if u in reduced or not _vectorizable(sink, u): continue
    out = substitute(sink, {u: lanes(int(u.src[0].arg["value"]))})
    fix = {}
    for x in toposort(out):
      if x.op == "END" and any(s.op == "VCONST" for s in x.src[1:]):
        rest = tuple(s for s in x.src[1:] if s.op != "VCONST")
        fix[x] = UOp("END", (x.src[0], *rest)) if rest else x.src[0]
    return simplify(substitute(out, fix) if fix else out)
  return sink


def _innermost_ready(sink: UOp, pick) -> list[UOp]:
  """The nodes `pick` selects none of whose sources contains another picked node."""
  inner: dict = {}
  ready = []
  for u in toposort(sink):
    below = any(inner[s] for s in u.src)
    if pick(u) and not below: ready.append(u)
    inner[u] = pick(u) or below
  return ready


def _group_reduce(sink: UOp, tree: bool = False) -> UOp:
  """REDUCEs over GROUP_REDUCE axes -> partials in LOCAL memory, BARRIER, final reduce
  (tree: combined pairwise by the work items, _tree_combine; else every item reads all)."""
  is_grouped = lambda u: u.op == "REDUCE" and any(_rtype(r) == "GROUP_REDUCE" for r in u.src[1:])
  nlocal = 1 + max((u.arg["slot"] for u in toposort(sink) if u.op == "BUFFER" and props(u).addrspace == "LOCAL"), default=-1)   # after staged tiles'
  while True:
    ready = _innermost_ready(sink, is_grouped)
    if not ready: return sink
    next_id = max(u.arg["id"] for u in toposort(sink) if u.op == "RANGE") + 1
    by_key: dict[tuple, list] = {}
    for red in ready:
      key = tuple(sorted((r for r in red.src[1:] if _rtype(r) == "GROUP_REDUCE"), key=lambda r: r.arg["id"]))
      by_key.setdefault(key, []).append(red)
    subs = {}
    opened: dict = {}
    for key, members in by_key.items():
      # the partials of every work item (LOCAL) or thread (THREAD) running this reduce at
      # once get their own slots: the buffer is indexed by those ranges and the group's
      outer = sorted({r for red in members for r in open_ranges(red, opened) if _rtype(r) in ("LOCAL", "THREAD")}, key=lambda r: r.arg["id"])
      if any(r.src[0].op != "CONST" for r in (*outer, *key)): raise CompileError("compile.form", "a GROUP_REDUCE axis needs a constant size", key[0])
      G, gidx = 1, const(0, "index")
      for r in (*outer, *key):
        n = int(r.src[0].arg["value"])
        gidx = UOp("ADD", (UOp("MUL", (gidx, const(n, "index"))), r))
        G *= n
      gidx = simplify(gidx)
      G_group = 1
      for r in key: G_group *= int(r.src[0].arg["value"])
      base = const(0, "index")
      for r in outer: base = UOp("ADD", (UOp("MUL", (base, const(int(r.src[0].arg["value"]), "index"))), r))
      base = simplify(UOp("MUL", (base, const(G_group, "index"))))
      stores = []
      for red in members:
        rest = tuple(r for r in red.src[1:] if r not in key)
        partial = UOp("REDUCE", (red.src[0], *rest), red.arg) if rest else red.src[0]
        dt = props(red).dtype
        lbuf = UOp("BUFFER", (shape_operand((G,)),), {"slot": nlocal, "dtype": dt, "device": "REG", "addrspace": "LOCAL"})
        nlocal += 1
        stores.append(UOp("STORE", (UOp("INDEX", (lbuf, gidx)), partial)))
      end = UOp("END", (stores[0] if len(stores) == 1 else UOp("GROUP", tuple(stores)), *key))
      bar = UOp("BARRIER", (end,))
      lbufs = [st.src[0].src[0] for st in stores]
      if tree:
        bar, left, next_id = _tree_combine(members, lbufs, bar, base, G_group, next_id)
        for red, lbuf in zip(members, lbufs):
          cur = UOp("AFTER", (lbuf, bar))
          parts = [UOp("INDEX", (cur, simplify(UOp("ADD", (base, const(j, "index")))))) for j in left]
          subs[red] = with_identity(red.arg["op"], combine(fold(red.arg["op"]), parts))
        continue
      g2 = UOp("RANGE", (const(G_group, "index"),), {"id": next_id, "type": "REDUCE"})
      next_id += 1
      for red, lbuf in zip(members, lbufs):
        subs[red] = UOp("REDUCE", (UOp("INDEX", (UOp("AFTER", (lbuf, bar)), simplify(UOp("ADD", (base, g2))))), g2), red.arg)
    sink = substitute(sink, subs)


def _tree_combine(members: list, lbufs: list, bar: UOp, base: UOp, n: int, next_id: int):
  """Combine the n partials at lbuf[base:base+n] pairwise, in steps until two are left:
  with h the largest power of two below n, the work items t < n - h each do
  lbuf[t] = op(lbuf[t], lbuf[t + h]) (a GROUP_REDUCE range of n - h lanes: render runs it
  on those items, the others skip it), a BARRIER, and n becomes h. The slots written,
  [0, n-h), and the slots read from other items, [h, n), never meet, so the items of a
  step do not race, and the BARRIERs order the steps. A step of one lane (n = h + 1) is
  not made: a range of one item is no range after simplification and every item would
  run it (a race); its one extra partial, lbuf[h], stays where it is (later steps touch
  only slots below h) and joins the final combine. The last two partials, and those
  extras, every item combines itself (a store there would race with the other items'
  reads). Returns (the last BARRIER, the slots left to combine, next free range id)."""
  extra = []
  while n > 2:
    h = 1 << ((n - 1).bit_length() - 1)
    if n - h == 1:
      extra.append(h)
      n = h
      continue
    t = UOp("RANGE", (const(n - h, "index"),), {"id": next_id, "type": "GROUP_REDUCE"})
    next_id += 1
    slot = simplify(UOp("ADD", (base, t)))
    steps = []
    for red, lbuf in zip(members, lbufs):
      cur = UOp("AFTER", (lbuf, bar))
      pair = UOp(fold(red.arg["op"]), (UOp("INDEX", (cur, slot)), UOp("INDEX", (cur, simplify(UOp("ADD", (slot, const(h, "index"))))))))
      steps.append(UOp("STORE", (UOp("INDEX", (cur, slot)), pair)))
    bar = UOp("BARRIER", (UOp("END", (steps[0] if len(steps) == 1 else UOp("GROUP", tuple(steps)), t)),))
    n = h
  return bar, list(range(n)) + extra[::-1], next_id


_KEYED = {"float32": ("int32", 0x7fffffff, 0x7f800000), "float64": ("int64", 0x7fffffffffffffff, 0x7ff0000000000000)}


def _order_key(b: UOp, it: str, mag: int) -> UOp:
  """The IEEE total-order key of float bits b (an involution: it also maps keys back)."""
  neg = UOp("CMPLT", (b, const(0, it)))
  return UOp("XOR", (b, UOp("WHERE", (neg, const(mag, it), const(0, it)))))


def _max_on_integers(sink: UOp) -> UOp:
  """Float MAX reductions -> one integer MAX reduction (see the module doc)."""
  def max_on_integers(u: UOp):
    if u.op != "REDUCE" or u.arg["op"] != "MAX" or len(u.src) < 2: return None
    dt = props(u).dtype
    if dt not in _KEYED: return None
    it, mag, inf = _KEYED[dt]
    b = UOp("BITCAST", (u.src[0],), it)
    m = UOp("AND", (b, const(mag, it)))
    neg_inf = UOp("BITCAST", (const("-inf", dt),), it)
    b = UOp("WHERE", (UOp("CMPLT", (const(inf, it), m)), neg_inf, b))   # every NaN made -inf: it never wins
    k = UOp("REDUCE", (_order_key(b, it, mag), *u.src[1:]), {"op": "MAX"})
    k = UOp("MAX", (k, _order_key(neg_inf, it, mag)))        # an empty reduce is -inf
    return UOp("BITCAST", (_order_key(k, it, mag),), dt)
  out = rebuild(sink, max_on_integers)
  return simplify(out) if out is not sink else sink


def _ranges_in(u: UOp, cache: dict) -> frozenset:
  """The open RANGEs u depends on (END closes its own; cache: answers so far, the walk
  stops at known nodes)."""
  return fold_up(u, cache, _end_closes)


def _end_closes(x: UOp, below: list) -> frozenset: return ranges_open(x, below, ("END",))


def _accumulate(sink: UOp) -> UOp:
  """REDUCE -> REG accumulators, innermost reductions first."""
  cache: dict = {}
  nacc = 0
  while True:
    ready = _innermost_ready(sink, lambda u: u.op == "REDUCE")
    if not ready: return sink
    groups: dict[frozenset, list] = {}
    for u in ready: groups.setdefault(frozenset(u.src[1:]), []).append(u)
    closed = {r for u in toposort(sink) if u.op == "END" for r in u.src[1:]}
    next_id = max((u.arg["id"] for u in toposort(sink) if u.op == "RANGE"), default=-1) + 1
    subs = {}
    for _, members in groups.items():
      rr = tuple(dict.fromkeys(members[0].src[1:]))     # the loop nest in the REDUCE's own order
      if not rr:   # a reduction over no ranges is its value
        for red in members: subs[red] = red.src[0]
        continue
      vals = [red.src[0] for red in members]
      if any(r in closed for r in rr):   # the ranges already close another loop: this one gets its own
        fresh = {}
        for r in rr:
          fresh[r] = UOp("RANGE", r.src, {"id": next_id, "type": r.arg.get("type", "REDUCE")}); next_id += 1
        vals = [substitute(v, fresh) for v in vals]
        rr = tuple(fresh[r] for r in rr)
      updates, results = [], []
      for red, val in zip(members, vals):
        dt, shape = props(red).dtype, props(red).shape
        dev = props(red).device   # the kernel's device (PARAMs may name one), so that the accumulator's reads match it
        acc = UOp("BUFFER", (shape_operand(shape),), {"slot": nacc, "dtype": dt, "device": list(dev) if isinstance(dev, tuple) else dev or "REG", "addrspace": "REG"})
        nacc += 1
        outer = sorted(_ranges_in(red, cache) - set(red.src[1:]), key=lambda r: r.arg["id"])
        ident = identity(red.arg["op"], dt)
        if shape: ident = UOp("VCONST", (), {"values": [ident.arg["value"]] * shape[0], "dtype": dt})   # a vector accumulator
        init = UOp("STORE", (UOp("AFTER", (acc, *outer)) if outer else acc, ident))
        cur = UOp("AFTER", (acc, init, *rr))
        updates.append(UOp("STORE", (acc, UOp(fold(red.arg["op"]), (cur, val)))))
        results.append((red, acc))
      end = UOp("END", (updates[0] if len(updates) == 1 else UOp("GROUP", tuple(updates)), *rr))
      for red, acc in results: subs[red] = UOp("AFTER", (acc, end))
    sink = substitute(sink, subs)


def _step_barriers(sink: UOp) -> UOp:
  """A reduce loop whose iterations store LOCAL memory and then wait at a BARRIER (a staged
  tile, compiler/passes/stage.py) ends each iteration with a BARRIER of its own: without it the
  next iteration's stores could overwrite what slower work items still read."""
  from tinyspec.compiler.passes.linearize import split_ends
  while any(u.op == "END" and len(u.src) > 2 for u in toposort(sink)): sink = split_ends(sink)   # (an END inside another's body stays whole in one pass)
  opened: dict = {}
  def step(e: UOp):
    if e.op != "END" or len(e.src) != 2 or _rtype(e.src[1]) != "REDUCE": return None
    body, r = e.src
    inner = {x for y in toposort(body) if y.op == "END" for x in y.src[1:]}   # loops nested in r (their own ENDs end their steps)
    if any(b.op == "BARRIER" and r in (o := open_ranges(b, opened)) and not (o & inner) for b in toposort(body)):
      return UOp("END", (UOp("GROUP", (body, UOp("BARRIER", (body,)))), r))
    return None
  return rebuild(sink, step)     # (bottom-up: an outer loop's END keeps its inner loops' barriers)


def _race_free(sink: UOp) -> UOp:
  """A kernel that shares LOCAL memory between work items (BARRIERs) must be proved to
  read there only what decision kernel-loops says (compiler/analysis/parallel.py hazards: the
  group reduce's partials, a staged tile per reduce step); else it is refused, never run."""
  if not any(u.op == "BARRIER" for u in toposort(sink)): return sink
  from tinyspec.compiler.analysis.parallel import hazards
  plain, ordered = hazards(sink)
  bad = [a for a in plain + ordered if props(a.storage).addrspace == "LOCAL"]
  if bad: raise CompileError("compile.order", f"a read of LOCAL buffer {bad[0].storage.arg['slot']} may see another work item's or step's store (a race between BARRIERs)", bad[0].node)
  return sink


def expand(sink: UOp, tree: bool = False) -> UOp:
  """tree: combine GROUP_REDUCE partials as a tree (render.yaml heuristics
  `group_combine`), not serially."""
  from tinyspec.compiler.passes.linearize import split_ends
  # float MAX reductions go to integer keys first: once unrolled or grouped, their partials
  # combine with the elementwise MAX, whose NaN and zero rules (decision max-nan) are not
  # the reduction's (decision reduce-max)
  return _race_free(_step_barriers(split_ends(_accumulate(_unroll(_group_reduce(_unroll(_vectorize(_max_on_integers(sink)), ("UPCAST",)), tree), ("UNROLL",))))))
