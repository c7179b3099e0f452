"""Reductions as memory: group reductions through LOCAL memory, and accumulators.

* A REDUCE over GROUP_REDUCE axes reduces in two steps through workgroup memory:

      lbuf    = BUFFER (G,), addrspace LOCAL           G: the group axes' sizes multiplied
      END(STORE(INDEX(lbuf, g), REDUCE(value, other ranges...)), g...)    each g a partial
      bar     = BARRIER(that END)
      result  = REDUCE(INDEX(AFTER(lbuf, bar), g2), g2)                   g2: a new REDUCE axis

  The group axes run in parallel (C: on threads, OpenCL: as the workgroup's work items,
  compiler/render/launch.py); the BARRIER orders every partial before the final reduce.
  Where the device's heuristics say `group_combine: tree` (GPUs), the final reduce is
  instead a tree of steps on the work items, a BARRIER after each (_tree_combine).
  REDUCEs over the same group axes, innermost first, share one buffer's END and BARRIER.
* Each REDUCE(value, r...) becomes an accumulator (the form of the kernel-loops decision, spec.md):

      acc  = BUFFER (), addrspace REG
      init = STORE(AFTER(acc, outer...), identity)        outer: the ranges the REDUCE is inside of
      cur  = AFTER(acc, init, r...)                       the running value, read in the loop
      END(STORE(acc, op(cur, value)), r...)               one loop for the reductions sharing r...
      result = AFTER(acc, END)

  REDUCEs over the same ranges, innermost first, share one loop (END over a GROUP of their
  updates); a loop whose ranges another END already closes gets ranges of its own.
The identity is decision reduce-empty's: 0 for ADD, 1 for MUL, the dtype minimum for MAX.
Both are one bottom-up rewrite whose context (compiler/passes/steps.py Rounds) groups the
reductions, innermost first, and numbers what they make in that order.
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort, fold_up
from tinyspec.rewrite import Pat, Rule, RuleSet, substitute
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.analysis.symbolic import simplify
from tinyspec.compiler.analysis.axes import ranges_open, open_ranges
from tinyspec.compiler.passes.readers import with_identity, identity, fold
from tinyspec.compiler.passes.steps import Step, Rounds


def combine(op: str, parts: list[UOp]) -> UOp:
  """op over parts as a balanced tree (short dependency chains)."""
  while len(parts) > 1:
    parts = [UOp(op, (parts[i], parts[i + 1])) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
  return parts[0]


def rtype(r: UOp) -> str: return r.arg.get("type", "LOOP")


def _next_range_id(nodes) -> int:
  return max((u.arg["id"] for u in nodes if u.op == "RANGE"), default=-1) + 1


def _rebuilt(red: UOp, rewrite) -> UOp:
  """REDUCE red with its sources as the rewrite has them."""
  src = tuple(rewrite(s) for s in red.src)
  return red if all(a is b for a, b in zip(src, red.src)) else red.replace(src=src)


# ------------------------------------------------------------------ group reductions
class _Grouping(Rounds):
  """The grouped REDUCEs by their group axes, and the slots and ids their groups take."""

  def __init__(self, sink: UOp, tree: bool):
    super().__init__(sink, _is_grouped, lambda u: tuple(sorted((r for r in u.src[1:] if rtype(r) == "GROUP_REDUCE"), key=lambda r: r.arg["id"])))
    nodes = toposort(sink)
    self.tree = tree
    self.nlocal = 1 + max((u.arg["slot"] for u in nodes if u.op == "BUFFER" and props(u).addrspace == "LOCAL"), default=-1)   # after staged tiles'
    self.next_id = _next_range_id(nodes)
    self.opened: dict = {}


def _is_grouped(u: UOp) -> bool: return u.op == "REDUCE" and any(rtype(r) == "GROUP_REDUCE" for r in u.src[1:])


def _grouping(sink: UOp, env) -> _Grouping | None:
  g = _Grouping(sink, env is not None and env.tree)
  return g if g else None


def group_reduce(x: UOp, ctx: _Grouping, rewrite, orig: UOp):
  """A REDUCE over GROUP_REDUCE axes -> partials in LOCAL memory, BARRIER, final reduce
  (tree: combined pairwise by the work items, _tree_combine; else every item reads all)."""
  if orig not in ctx.group_of: return None
  return ctx.result(orig, lambda n, members: _build_group([_rebuilt(m, rewrite) for m in members], members, ctx))


def _build_group(reds: list[UOp], origs: list[UOp], ctx: _Grouping) -> dict:
  key = tuple(sorted((r for r in reds[0].src[1:] if rtype(r) == "GROUP_REDUCE"), key=lambda r: r.arg["id"]))
  # the partials of every work item (LOCAL) or thread (THREAD) running this reduce at
  # once get their own slots: the buffer is indexed by those ranges and the group's
  outer = sorted({r for red in reds for r in open_ranges(red, ctx.opened) if rtype(r) in ("LOCAL", "THREAD")}, key=lambda r: r.arg["id"])
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
  for red in reds:
    rest = tuple(r for r in red.src[1:] if r not in key)
    partial = UOp("REDUCE", (red.src[0], *rest), red.arg) if rest else red.src[0]
    lbuf = UOp("BUFFER", (shape_operand((G,)),), {"slot": ctx.nlocal, "dtype": props(red).dtype, "device": "REG", "addrspace": "LOCAL"})
    ctx.nlocal += 1
    stores.append(UOp("STORE", (UOp("INDEX", (lbuf, gidx)), partial)))
  bar = UOp("BARRIER", (UOp("END", (stores[0] if len(stores) == 1 else UOp("GROUP", tuple(stores)), *key)),))
  lbufs = [st.src[0].src[0] for st in stores]
  out = {}
  if ctx.tree:
    bar, left, ctx.next_id = _tree_combine(reds, lbufs, bar, base, G_group, ctx.next_id)
    for orig, red, lbuf in zip(origs, reds, lbufs):
      cur = UOp("AFTER", (lbuf, bar))
      parts = [UOp("INDEX", (cur, simplify(UOp("ADD", (base, const(j, "index")))))) for j in left]
      whole = combine(fold(red.arg["op"]), parts)
      out[orig] = with_identity(red.arg["op"], whole) if len(parts) > 1 else whole     # one element: itself (reduce-one)
    return out
  g2 = UOp("RANGE", (const(G_group, "index"),), {"id": ctx.next_id, "type": "REDUCE"})
  ctx.next_id += 1
  for orig, red, lbuf in zip(origs, reds, lbufs):
    out[orig] = UOp("REDUCE", (UOp("INDEX", (UOp("AFTER", (lbuf, bar)), simplify(UOp("ADD", (base, g2))))), g2), red.arg)
  return out


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
    bar = tree_step(members, lbufs, bar, base, n - h, h, next_id)
    next_id += 1
    n = h
  return bar, list(range(n)) + extra[::-1], next_id


def tree_step(members: list, lbufs: list, bar: UOp, base: UOp, lanes: int, h: int, range_id: int) -> UOp:
  """One step of _tree_combine: the work items t < lanes do lbuf[t] = op(lbuf[t], lbuf[t + h])
  (a GROUP_REDUCE range of `lanes`), then a BARRIER, which is returned."""
  t = UOp("RANGE", (const(lanes, "index"),), {"id": range_id, "type": "GROUP_REDUCE"})
  slot = simplify(UOp("ADD", (base, t)))
  steps = []
  for red, lbuf in zip(members, lbufs):
    cur = UOp("AFTER", (lbuf, bar))
    pair = UOp(fold(red.arg["op"]), (UOp("INDEX", (cur, slot)), UOp("INDEX", (cur, simplify(UOp("ADD", (slot, const(h, "index"))))))))
    steps.append(UOp("STORE", (UOp("INDEX", (cur, slot)), pair)))
  return UOp("BARRIER", (UOp("END", (steps[0] if len(steps) == 1 else UOp("GROUP", tuple(steps)), t)),))


# ------------------------------------------------------------------ accumulators
class _Accumulators(Rounds):
  """The REDUCEs by their ranges, innermost first; the accumulator slots, the fresh range
  ids and the ranges closed so far, handed out in that order."""

  def __init__(self, sink: UOp):
    super().__init__(sink, lambda u: u.op == "REDUCE", lambda u: frozenset(u.src[1:]))
    nodes = toposort(sink)
    self.closed = {r for u in nodes if u.op == "END" for r in u.src[1:]}    # ranges some END closes (grows round by round)
    self.closed_round: tuple[int, set] = (0, set(self.closed))
    self.nacc = 0
    self.next_id = _next_range_id(nodes)
    self.cache: dict = {}


def _accumulators(sink: UOp, env) -> _Accumulators | None:
  a = _Accumulators(sink)
  return a if a else None


def accumulate(x: UOp, ctx: _Accumulators, rewrite, orig: UOp):
  """REDUCE -> a REG accumulator, one loop for the REDUCEs of a round over the same ranges."""
  return ctx.result(orig, lambda n, members: _build_loop(n, [_rebuilt(m, rewrite) for m in members], members, ctx))


def _build_loop(n: int, reds: list[UOp], origs: list[UOp], ctx: _Accumulators) -> dict:
  if ctx.closed_round[0] != n: ctx.closed_round = (n, set(ctx.closed))   # the ENDs there were when the round began
  rr = tuple(dict.fromkeys(reds[0].src[1:]))     # the loop nest in the REDUCE's own order
  if not rr: return {o: red.src[0] for o, red in zip(origs, reds)}     # a reduction over no ranges is its value
  vals = [red.src[0] for red in reds]
  if any(r in ctx.closed_round[1] for r in rr):   # the ranges already close another loop: this one gets its own
    fresh = {}
    for r in rr:
      fresh[r] = UOp("RANGE", r.src, {"id": ctx.next_id, "type": r.arg.get("type", "REDUCE")}); ctx.next_id += 1
    vals = [substitute(v, fresh) for v in vals]
    rr = tuple(fresh[r] for r in rr)
  ctx.closed |= set(rr)
  updates, results = [], []
  for red, val in zip(reds, vals):
    dt, shape = props(red).dtype, props(red).shape
    dev = props(red).device   # the kernel's device (PARAMs may name one), so that the accumulator's reads match it
    acc = UOp("BUFFER", (shape_operand(shape),), {"slot": ctx.nacc, "dtype": dt, "device": list(dev) if isinstance(dev, tuple) else dev or "REG", "addrspace": "REG"})
    ctx.nacc += 1
    outer = sorted(fold_up(red, ctx.cache, _end_closes) - set(red.src[1:]), key=lambda r: r.arg["id"])
    ident = identity(red.arg["op"], dt)
    if shape: ident = UOp("VCONST", (), {"values": [ident.arg["value"]] * shape[0], "dtype": dt})   # a vector accumulator
    init = UOp("STORE", (UOp("AFTER", (acc, *outer)) if outer else acc, ident))
    cur = UOp("AFTER", (acc, init, *rr))
    updates.append(UOp("STORE", (acc, UOp(fold(red.arg["op"]), (cur, val)))))
    results.append(acc)
  end = UOp("END", (updates[0] if len(updates) == 1 else UOp("GROUP", tuple(updates)), *rr))
  return {o: UOp("AFTER", (acc, end)) for o, acc in zip(origs, results)}


def _end_closes(x: UOp, below: list) -> frozenset:
  """The open RANGEs x depends on (END closes its own)."""
  return ranges_open(x, below, ("END",))


GROUP_REDUCE = Step("group_reduce", RuleSet([Rule("group_reduce", Pat("REDUCE", name="x"), group_reduce)], "group_reduce"), _grouping, once=True)
ACCUMULATE = Step("accumulate", RuleSet([Rule("accumulate", Pat("REDUCE", name="x"), accumulate)], "accumulate"), _accumulators, once=True)
