"""Stage 3, optimize: AxisTypes and OptOps on a kernel's ranges.

Every RANGE carries an AxisType (ops.yaml `axis_types`). rangeify makes output axes LOOP
and reduce axes REDUCE; a kernel the user writes may type its own. Here:
  1. parallelism is proved or not used (compiler/analysis/parallel.py): an axis keeps a parallel
     or reordering type the graph gives it (GLOBAL, LOCAL, THREAD, UPCAST, UNROLL,
     GROUP_REDUCE) only where a SPLIT to that type would be allowed -- its iterations
     touch no element another one touches with a write and carry nothing from one to
     the next; otherwise it becomes LOOP (REDUCE when REDUCEs close it), which decision
     kernel-loops runs in order. SPECIALs that are not conflict-free become LOOP ranges
     outermost (by name), or, across a BARRIER, are refused (opt.parallel). The output
     axes of one loop nest then become GLOBAL where they are conflict-free;
  2. the OptOps apply left to right (ops.yaml `opt_ops`): the ones given, or by default
     the hand-coded heuristics' (compiler/passes/heuristics.py) or a BEAM search's winner
     (compiler.beam). An opt is (op, axis, arg) with `axis` an index into the kernel's
     axes in RANGE-id order (a split's new axis gets the next id, so it comes last):
       SPLIT  arg (k, type) or (k, type, top): axis n -> (n/k, k) [(k, n/k) if top]; the
              new k-sized axis gets `type`, which must list the axis's type in its
              `split_from` (rule opt.split_from), `top` must agree with the type's
              `direction` (opt.direction) and k must divide n (opt.divisible). GLOBAL,
              LOCAL and THREAD need independent iterations (opt.parallel); GROUP_REDUCE
              splits a REDUCE's own axis (opt.parallel); UPCAST, UNROLL and GROUP_REDUCE
              copy or reorder iterations, which a loop-carried read or two iterations
              writing one element forbid (opt.carried);
              UNROLL and GROUP_REDUCE make independent partial results, which a float
              MUL reduction's fixed order forbids (opt.order);
       PADTO  arg m: the axis grows to the next multiple of m; the new iterations are
              masked (their stores are gated off, their reduce inputs are the identity);
       SWAP   arg j: exchange the nesting order of output axes i and j;
       STAGE  arg k: a gemm-shaped reduce reads its inputs through local memory, k
              reduce steps at a time (compiler/passes/tiles.py);
       NOLOCALS: no LOCAL, GROUP_REDUCE or STAGE (workgroup memory) afterwards;
       TC     refused (opt.unsupported): no renderer here has matrix-unit rules.
     A rejected opt raises CompileError with the rule id;
  3. THREAD axes move to the outside of their nest (C runs the outermost loop's slices
     on threads); the other output axes keep their order;
  4. every parallel and reordering axis is proved conflict-free once more (a failure
     there is a bug of the opts above, refused as opt.parallel rather than run).
What each AxisType becomes: expand (UPCAST, UNROLL, GROUP_REDUCE) and render (GLOBAL,
LOCAL, THREAD) say.
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.tables import tables
from tinyspec.limits import limits
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.errors import CompileError, REFUSED
from tinyspec.rewrite import Pat, Rule, RuleSet, graph_rewrite, substitute
from tinyspec.compiler.analysis.symbolic import simplify
from tinyspec.compiler.analysis.axes import PARALLEL, REORDERING, WORKGROUP, ranges, axis_type, size, output_nest, closers, carried, open_ranges, top_nest, reorderable
from tinyspec.compiler.passes.readers import identity
from tinyspec.compiler.analysis.parallel import accesses, conflict_free, WRITES
from tinyspec.compiler.passes.tiles import stage_tiles
from tinyspec.compiler.analysis.parallel import hazards
from tinyspec.compiler.passes.expand import expand
from tinyspec.compiler.passes.heuristics import default_opts

def retype(x: UOp, ctx: dict):
  """A RANGE -> the same range with the AxisType ctx gives it."""
  t = ctx.get(x)
  return UOp("RANGE", x.src, {"id": x.arg["id"], "type": t}) if t is not None and x.arg.get("type") != t else None


RETYPE = RuleSet([Rule("retype", Pat("RANGE", name="x"), retype)], "retype")


def _retype(sink: UOp, mapping: dict[UOp, str]) -> UOp:
  if not any(r.arg.get("type") != t for r, t in mapping.items()): return sink
  return graph_rewrite(sink, RETYPE, mapping, top_down=True, once=True)


def type_refusal(sink: UOp, r: UOp, kind: str, acc=None, target: str | None = None):
  """(rule, why) when axis r may not have type `kind` by what its iterations do, or None:
  parallel types need conflict-free iterations closed by ENDs (a REDUCE's iterations feed
  one value); GROUP_REDUCE a REDUCE's own axis; UNROLL and GROUP_REDUCE a reduction
  that may reorder; reordering types conflict-free iterations."""
  closing = closers(sink, r)
  wg = target == "opencl"      # work-groups with their own LOCAL memory and BARRIERs
  if kind in PARALLEL and (any(u.op == "REDUCE" for u in closing) or not conflict_free(sink, r, acc, wg)):
    return "opt.parallel", "its iterations are not independent (a reduction, a carried value, or two iterations touching one element with a write)"
  if kind == "GROUP_REDUCE" and not (closing and all(u.op == "REDUCE" for u in closing)):
    return "opt.parallel", "it is not a REDUCE's own axis; GROUP_REDUCE combines partial reductions"
  if kind in ("UNROLL", "GROUP_REDUCE") and any(u.op == "REDUCE" and not reorderable(u) for u in closing):
    return "opt.order", "it reduces with a float MUL, whose order is fixed (ops.yaml decision reduce-empty)"
  if kind in REORDERING and (carried(sink, r) or not conflict_free(sink, r, acc, wg)):
    return "opt.carried", "its iterations must run in order, each once (a loop-carried read, or two iterations touching one element with a write)"
  if kind not in PARALLEL + REORDERING + ("LOOP", "REDUCE"):
    return "opt.unsupported", f"{kind} axes are made by OptOps this compiler does not have"
  return None


def initial_types(sink: UOp) -> UOp:
  """Axis types the kernel may keep (the graph's own where allowed, else LOOP or
  REDUCE), then the conflict-free output axes of one loop nest become GLOBAL."""
  acc = accesses(sink)
  demote = {}
  for r in ranges(sink):
    t = axis_type(r)
    if t not in ("LOOP", "REDUCE") and type_refusal(sink, r, t, acc) is not None:
      closing = closers(sink, r)
      demote[r] = "REDUCE" if closing and all(u.op == "REDUCE" for u in closing) else "LOOP"
  sink = _retype(sink, demote)
  nest = output_nest(sink)
  if nest is None: return sink
  end, rs = nest
  acc = accesses(sink)
  return _retype(sink, {r: "GLOBAL" for r in rs if axis_type(r) == "LOOP" and conflict_free(sink, r, acc)})


def serial_specials(sink: UOp, target: str) -> UOp:
  """SPECIALs (work items the graph names) run in parallel only where they are
  conflict-free; otherwise they become LOOP ranges around the whole body, outermost and
  ordered by name as decision kernel-loops iterates them. Across a BARRIER the work
  items must run together, so conflicting ones are refused (opt.parallel); on OpenCL the
  LOCAL buffers a workgroup shares are the BARRIER's business and are left out."""
  sp = sorted({u for u in toposort(sink) if u.op == "SPECIAL"}, key=lambda u: u.arg["name"])
  if not sp: return sink
  acc = accesses(sink)
  barrier = any(u.op == "BARRIER" for u in toposort(sink))
  if barrier and target == "opencl": acc = [a for a in acc if props(a.storage).addrspace != "LOCAL"]
  if all(conflict_free(sink, u, acc) for u in sp): return sink
  if barrier:
    raise CompileError("opt.parallel", "work items (SPECIALs) that touch one element with a write, across a BARRIER: they can run neither "
                       "in parallel nor as loops" + (" (C runs work items as loops)" if target == "c" else ""))
  renum = {r: r.replace(arg={**r.arg, "id": r.arg["id"] + len(sp)}) for r in ranges(sink)}
  loops = [UOp("RANGE", (u.src[0],), {"id": k, "type": "LOOP"}) for k, u in enumerate(sp)]
  body = substitute(sink, {**renum, **dict(zip(sp, loops))})
  inner = body.src[0] if len(body.src) == 1 else UOp("GROUP", body.src)
  return UOp("SINK", (UOp("END", (inner, *loops)),), body.arg)


def program_axes(lin: UOp) -> UOp:
  """A LINEAR given as it is (a program-level graph): its parallel axis types are kept
  only where allowed (else LOOP), as for a kernel; conflicting SPECIALs and reads of what
  it writes that the loops cannot order are refused (a LINEAR is not restructured)."""
  sink = UOp("SINK", tuple(u for u in lin.src if u.op in WRITES or u.op == "END"))
  plain, ordered = hazards(sink)
  if plain or ordered:
    raise CompileError("compile.order", "a LINEAR reads what it writes where its loops would see a store decision kernel-loops hides from the read")
  acc = accesses(sink)
  if not all(conflict_free(sink, u, acc) for u in toposort(sink) if u.op == "SPECIAL"):
    raise CompileError("opt.parallel", "a LINEAR's work items (SPECIALs) touch one element with a write")
  demote = {r: r.replace(arg={**r.arg, "type": "LOOP"}) for r in ranges(sink)
            if axis_type(r) not in ("LOOP", "REDUCE") and type_refusal(sink, r, axis_type(r), acc) is not None}
  return substitute(lin, demote) if demote else lin


def proved_parallel(sink: UOp, target: str | None = None) -> None:
  """Every parallel and reordering axis is allowed its type (module doc, step 4)."""
  acc = accesses(sink)
  for r in ranges(sink):
    t = axis_type(r)
    if t in PARALLEL + REORDERING and (why := type_refusal(sink, r, t, acc, target)) is not None:
      raise CompileError("opt.parallel", f"axis {r.arg['id']} ({t}) may not run in parallel or reordered: {why[1]}")


# ------------------------------------------------------------------ the OptOps
def split_range(x: UOp, ctx: tuple):
  """The axis split -> outer * k' + inner."""
  r, expr, outer, inner = ctx
  return expr if x is r else None


def split_closer(x: UOp, ctx: tuple):
  """The END or REDUCE that closed the split axis closes (outer, inner) instead."""
  r, expr, outer, inner = ctx
  if expr not in x.src[1:]: return None
  srcs = [x.src[0]]
  for s in x.src[1:]: srcs += [outer, inner] if s is expr else [s]
  return x.replace(src=tuple(srcs))


SPLIT = RuleSet([Rule("split_range", Pat("RANGE", name="x"), split_range), Rule("split_closer", Pat(("END", "REDUCE"), name="x"), split_closer)], "split")


def _split(sink: UOp, r: UOp, k: int, kind: str, top: bool, next_id: int) -> UOp:
  n = size(r)
  if n is None: raise CompileError("opt.divisible", f"axis {r.arg['id']} has a symbolic size and cannot be split")
  if k <= 0 or n % k: raise CompileError("opt.divisible", f"split factor {k} does not divide axis {r.arg['id']} of size {n}")
  cur = axis_type(r)
  sizes = (k, n // k) if top else (n // k, k)
  kinds = (kind, cur) if top else (cur, kind)
  outer = UOp("RANGE", (const(sizes[0], "index"),), {"id": r.arg["id"], "type": kinds[0]})
  inner = UOp("RANGE", (const(sizes[1], "index"),), {"id": next_id, "type": kinds[1]})
  expr = UOp("ADD", (UOp("MUL", (outer, const(sizes[1], "index"))), inner))
  return simplify(graph_rewrite(sink, SPLIT, (r, expr, outer, inner), once=True))


class _Padding:
  """The axis padded, its padded range and validity, and the ranges open at each node."""
  def __init__(self, r: UOp, r2: UOp, valid: UOp):
    self.r, self.r2, self.valid = r, r2, valid
    self.opened: dict = {}


def pad_range(x: UOp, ctx: _Padding):
  """The padded axis -> its longer range."""
  return ctx.r2 if x is ctx.r else None


def pad_mask(x: UOp, ctx: _Padding):
  """The added iterations store nothing (the store's gate) and reduce nothing (the identity)."""
  if x.op == "STORE" and ctx.r2 in open_ranges(x, ctx.opened):
    return x.replace(src=(x.src[0], x.src[1], UOp("AND", (x.src[2], ctx.valid)) if len(x.src) == 3 else ctx.valid))
  if x.op == "REDUCE" and ctx.r2 in x.src[1:]:
    return x.replace(src=(UOp("WHERE", (ctx.valid, x.src[0], identity(x.arg["op"], props(x).dtype))), *x.src[1:]))
  return None


PAD = RuleSet([Rule("pad_range", Pat("RANGE", name="x"), pad_range), Rule("pad_mask", Pat(("STORE", "REDUCE"), name="x"), pad_mask)], "pad")


def _padto(sink: UOp, r: UOp, m: int) -> UOp:
  """Grow r to a multiple of m; the added iterations store nothing and reduce nothing."""
  n = size(r)
  if n is None: raise CompileError("opt.divisible", f"axis {r.arg['id']} has a symbolic size and cannot be padded")
  if not isinstance(m, int) or isinstance(m, bool) or m <= 0: raise CompileError("opt.divisible", f"PADTO needs a positive multiple, not {m!r}")
  padded = -(-n // m) * m
  if padded > limits().max_numel:   # (an index must stay far from int64 overflow, as a shape's)
    raise CompileError("opt.divisible", f"PADTO to a multiple of {m} makes axis {r.arg['id']} {padded:,} long, more than limits.max_numel")
  if padded == n: return sink
  # a REDUCE of one element is that element (decision reduce-one): taken as it is, before
  # padding would fold it with identities (0 + -0.0 is +0.0)
  one = {u: substitute(u.src[0], {x: const(0, "index") for x in u.src[1:]}) for u in toposort(sink)
         if u.op == "REDUCE" and r in u.src[1:] and all(size(x) == 1 for x in u.src[1:])}
  if one: sink = substitute(sink, one)
  r2 = UOp("RANGE", (const(padded, "index"),), r.arg)
  return simplify(graph_rewrite(sink, PAD, _Padding(r, r2, UOp("CMPLT", (r2, const(n, "index")))), once=True))


def _swap(sink: UOp, a: UOp, b: UOp) -> UOp:
  nest = top_nest(sink)
  if nest is None or a not in nest[1] or b not in nest[1]:
    raise CompileError("opt.axis", "SWAP exchanges two output axes of one loop nest")
  if axis_type(a) not in PARALLEL or axis_type(b) not in PARALLEL:
    raise CompileError("opt.parallel", "SWAP reorders independent (GLOBAL, LOCAL, THREAD) axes only")
  end, rs = nest
  i, j = rs.index(a), rs.index(b)
  rs[i], rs[j] = rs[j], rs[i]
  return substitute(sink, {end: end.replace(src=(end.src[0], *rs))})


def threads_outside(sink: UOp) -> UOp:
  """THREAD axes first in their nest (stable: the others keep their order)."""
  nest = top_nest(sink)
  if nest is None: return sink
  end, rs = nest
  order = sorted(rs, key=lambda r: axis_type(r) != "THREAD")
  if order == rs: return sink
  return substitute(sink, {end: end.replace(src=(end.src[0], *order))})


def _workgroup(sink: UOp) -> int:
  """Work items per workgroup: the LOCAL and GROUP_REDUCE axes that some store or
  reduction runs inside of, multiplied; sibling axes (a fused row kernel's lanes, one
  after the other) share the work items (render gives them one id)."""
  group, memo = 1, {}
  for u in toposort(sink):
    if u.op in ("STORE", "REDUCE"):
      n = 1
      for r in open_ranges(u, memo) | set(u.src[1:] if u.op == "REDUCE" else ()):
        if r.op == "RANGE" and axis_type(r) in WORKGROUP: n *= size(r) or 1
      group = max(group, n)
  return group


def _parse(opt):
  opt = list(opt) if isinstance(opt, (list, tuple)) else [opt]
  op, axis, arg = (opt + [None, None, None])[:3]
  return op, axis, arg


def check_split(sink: UOp, r: UOp, axis: int, k, kind, top, no_locals: bool, dev, target: str | None = None):
  """The table checks of SPLIT (see the module doc); returns top with its default."""
  T = tables().axis_types
  if kind not in T: raise CompileError("opt.split_from", f"{kind!r} is not an AxisType (ops.yaml axis_types)")
  cur = axis_type(r)
  allowed = T[kind].get("split_from", [])
  if cur not in allowed:
    raise CompileError("opt.split_from", f"{kind} splits from {', '.join(allowed) or 'nothing'}, not from {cur} (ops.yaml axis_types)")
  direction = T[kind].get("direction")
  if top is None: top = (direction if isinstance(direction, str) else (direction or ["inner"])[0]) == "outer"
  if isinstance(direction, str) and bool(top) != (direction == "outer"):
    raise CompileError("opt.direction", f"{kind} is split off on the {direction} side (ops.yaml axis_types)")
  if not isinstance(k, int) or isinstance(k, bool): raise CompileError("opt.divisible", f"split factor {k!r} is not an integer")
  if kind in WORKGROUP and no_locals: raise CompileError("opt.unsupported", f"{kind} after NOLOCALS")
  if kind in PARALLEL and cur not in PARALLEL:
    raise CompileError("opt.parallel", f"axis {axis} ({cur}) is not independent; it cannot get {kind}")
  why = type_refusal(sink, r, kind, None, target or (dev.target if dev is not None else None))
  if why is not None: raise CompileError(why[0], f"axis {axis} cannot get {kind}: {why[1]}")
  if kind == "GROUP_REDUCE" and dev is not None and dev.max_local and k > dev.max_local:
    raise CompileError("opt.unsupported", f"a group of {k} exceeds the {dev.max_local} work items of a workgroup on {dev.name}")
  return bool(top)


def apply_opts(sink: UOp, opts, target: str = "c", dev=None) -> UOp:
  """Apply OptOps left to right (see the module doc for their form)."""
  T = tables().opt_ops
  no_locals = False
  if opts is not None and not isinstance(opts, (list, tuple)):
    raise CompileError("opt.unsupported", f"OptOps are a list of [op, axis, arg], not {type(opts).__name__}")
  for n, opt in enumerate(opts or ()):
    op, axis, arg = _parse(opt)
    if not isinstance(op, str) or op not in T: raise CompileError("opt.unsupported", f"unknown OptOp {op!r}")
    if T[op].get("must_be_first") and n != 0: raise CompileError("opt.first", f"{op} must be the first OptOp")
    if op == "NOLOCALS": no_locals = True; continue
    if op == "TC":
      name = dev.name if dev is not None else target
      raise CompileError("opt.unsupported", f"TC needs matrix units: the {target} renderer has no WMMA rules and {name} has no tensor cores")
    axes = ranges(sink)
    if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis < len(axes):
      raise CompileError("opt.axis", f"{op}: axis {axis!r} is not one of the kernel's {len(axes)} axes")
    r = axes[axis]
    if op == "SPLIT":
      k, kind, top = (list(arg) + [None, None])[:3] if isinstance(arg, (list, tuple)) else (arg, None, None)
      top = check_split(sink, r, axis, k, kind, top, no_locals, dev, target)
      sink = _split(sink, r, k, kind, top, max(a.arg["id"] for a in axes) + 1)
    elif op == "PADTO":
      if carried(sink, r): raise CompileError("opt.carried", f"axis {axis} carries a value from one iteration to the next; padding it would add iterations")
      sink = _padto(sink, r, arg)
    elif op == "STAGE":
      if no_locals: raise CompileError("opt.unsupported", "STAGE after NOLOCALS")
      sink = stage_tiles(sink, r, arg, max(a.arg["id"] for a in axes) + 1, _split, target, dev)
    elif op == "SWAP":
      if not isinstance(arg, int) or isinstance(arg, bool) or not 0 <= arg < len(axes): raise CompileError("opt.axis", f"SWAP: axis {arg!r} does not exist")
      sink = _swap(sink, r, axes[arg])
    else:
      raise CompileError("opt.unsupported", f"{op} is not implemented for target {target}")
  if dev is not None and dev.max_local:
    group = _workgroup(sink)
    if group > dev.max_local: raise CompileError("opt.unsupported", f"a workgroup of {group} work items (LOCAL x GROUP_REDUCE) exceeds the {dev.max_local} of {dev.name}")
  sink = threads_outside(sink)
  proved_parallel(sink, target)
  return sink


def opts_fit(sink: UOp, target: str, dev):
  """opts -> do they apply to the kernel and expand (its LOCAL tiles proved race-free)?
  What the heuristics try a staged tiling with (compiler/passes/heuristics.py default_opts)."""
  def fits(opts) -> bool:
    try: expand(apply_opts(sink, opts, target, dev))
    except REFUSED: return False
    return True
  return fits


def optimize(sink: UOp, target: str = "c", opts=None, dev=None) -> UOp:
  """initial_types, then `opts` (None: the device's default, see compiler/passes/heuristics.py)."""
  sink = initial_types(serial_specials(sink, target))
  if opts is None:
    opts = default_opts(sink, target, dev, opts_fit(sink, target, dev))
  return apply_opts(sink, opts, target, dev)
