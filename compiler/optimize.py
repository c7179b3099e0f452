"""Stage 3, optimize: AxisTypes and OptOps on a kernel's ranges.

Every RANGE carries an AxisType (ops.yaml `axis_types`). rangeify makes output axes LOOP
and reduce axes REDUCE. Here:
  1. the output axes become GLOBAL when the kernel's iterations are independent: its
     one loop nest writes each element from exactly one iteration (the store index is
     the loop ranges themselves), so the axes may run in parallel;
  2. the OptOps in `opts` apply left to right (ops.yaml `opt_ops`). An opt is
     (op, axis, arg) with `axis` an index into the kernel's axes in RANGE-id order:
       SPLIT  arg (k, type) or (k, type, top): axis n -> (n/k, k) [(k, n/k) if top]; the
              new k-sized axis gets `type`, which must list the axis's type in its
              `split_from` (rule opt.split_from) and k must divide n (opt.divisible);
       SWAP   arg j: exchange the nesting order of axes i and j (both output axes);
       NOLOCALS: no LOCAL axes may be made afterwards;
       PADTO, TC: refused (opt.unsupported) -- this target has no padded stores or
              matrix units yet.
     A rejected opt raises CompileError with the rule id.
The default opt list is empty; heuristics and BEAM search fill it later.
"""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.tables import tables
from compiler.props import props, const, CompileError
from compiler.rewrite import toposort, substitute
from compiler.symbolic import simplify

PARALLEL = ("GLOBAL", "LOCAL", "THREAD")


def ranges(sink: UOp) -> list[UOp]:
  """The kernel's axes: its RANGEs in id order."""
  return sorted((u for u in toposort(sink) if u.op == "RANGE"), key=lambda r: r.arg["id"])


def _retype(sink: UOp, mapping: dict[UOp, str]) -> UOp:
  subs = {r: UOp("RANGE", r.src, {"id": r.arg["id"], "type": t}) for r, t in mapping.items() if r.arg.get("type") != t}
  return substitute(sink, subs) if subs else sink


def output_nest(sink: UOp):
  """(END, its ranges) when the kernel is one loop nest of stores whose every store
  writes INDEX(out, ranges in order...) with each of the nest's ranges exactly once;
  else None."""
  if len(sink.src) != 1 or sink.src[0].op != "END": return None
  end = sink.src[0]
  rs = list(end.src[1:])
  stores = [end.src[0]] if end.src[0].op == "STORE" else list(end.src[0].src) if end.src[0].op == "GROUP" else []
  if not stores or not all(s.op == "STORE" for s in stores): return None
  for s in stores:
    dst = s.src[0]
    if dst.op != "INDEX" or dst.src[0].op != "PARAM": return None
    used = [i for i in dst.src[1:] if i.op == "RANGE"]
    if sorted(used, key=id) != sorted(rs, key=id) or not all(i.op in ("RANGE", "CONST") for i in dst.src[1:]): return None
  return end, rs


def initial_types(sink: UOp) -> UOp:
  """Output axes of an independent loop nest become GLOBAL."""
  nest = output_nest(sink)
  if nest is None: return sink
  end, rs = nest
  return _retype(sink, {r: "GLOBAL" for r in rs if r.arg.get("type", "LOOP") == "LOOP"})


def _split(sink: UOp, r: UOp, k: int, kind: str, top: bool, next_id: int) -> UOp:
  n = props(r.src[0]).value if r.src[0].op == "CONST" else None
  if n is None: raise CompileError("opt.divisible", f"axis {r.arg['id']} has a symbolic size and cannot be split")
  if k <= 0 or n % k: raise CompileError("opt.divisible", f"split factor {k} does not divide axis {r.arg['id']} of size {n}")
  cur = r.arg.get("type", "LOOP")
  allowed = tables().axis_types.get(kind, {}).get("split_from", [])
  if kind not in tables().axis_types: raise CompileError("opt.split_from", f"{kind} is not an AxisType")
  if cur not in allowed:
    raise CompileError("opt.split_from", f"{kind} splits from {', '.join(allowed) or 'nothing'}, not from {cur} (ops.yaml axis_types)")
  sizes = (k, n // k) if top else (n // k, k)
  kinds = (kind, cur) if top else (cur, kind)
  outer = UOp("RANGE", (const(sizes[0], "index"),), {"id": r.arg["id"], "type": kinds[0]})
  inner = UOp("RANGE", (const(sizes[1], "index"),), {"id": next_id, "type": kinds[1]})
  expr = UOp("ADD", (UOp("MUL", (outer, const(sizes[1], "index"))), inner))
  # r is replaced by outer*k' + inner everywhere; the END and REDUCE that closed r then
  # close (outer, inner) instead
  out = substitute(sink, {r: expr})
  # substitute turned `r` in END/REDUCE range lists into expr; put the two ranges back
  fix = {}
  for u in toposort(out):
    if u.op in ("END", "REDUCE") and expr in u.src[1:]:
      srcs = [u.src[0]]
      for s in u.src[1:]: srcs += [outer, inner] if s is expr else [s]
      fix[u] = u.replace(src=tuple(srcs))
  if fix: out = substitute(out, fix)
  return simplify(out)


def _swap(sink: UOp, a: UOp, b: UOp) -> UOp:
  nest = output_nest(sink)
  if nest is None or a not in nest[1] or b not in nest[1]:
    raise CompileError("opt.axis", "SWAP exchanges two output axes of one loop nest")
  end, rs = nest
  i, j = rs.index(a), rs.index(b)
  rs[i], rs[j] = rs[j], rs[i]
  return substitute(sink, {end: end.replace(src=(end.src[0], *rs))})


def apply_opts(sink: UOp, opts, target: str = "c") -> UOp:
  """Apply OptOps left to right (see the module doc for their form)."""
  no_locals = False
  for n, opt in enumerate(opts or ()):
    op, axis, arg = (list(opt) + [None, None])[:3]
    if op not in tables().opt_ops: raise CompileError("opt.unsupported", f"unknown OptOp {op!r}")
    if tables().opt_ops[op].get("must_be_first") and n != 0: raise CompileError("opt.first", f"{op} must be the first OptOp")
    if op == "NOLOCALS": no_locals = True; continue
    axes = ranges(sink)
    if not isinstance(axis, int) or not 0 <= axis < len(axes):
      raise CompileError("opt.axis", f"{op}: axis {axis!r} is not one of the kernel's {len(axes)} axes")
    r = axes[axis]
    if op == "SPLIT":
      k, kind, top = (list(arg) + [None])[:3] if isinstance(arg, (list, tuple)) else (arg, None, None)
      direction = tables().axis_types.get(kind, {}).get("direction")
      if top is None: top = direction == "outer"
      if isinstance(direction, str) and bool(top) != (direction == "outer"):
        raise CompileError("opt.direction", f"{kind} is split off on the {direction} side (ops.yaml axis_types)")
      if kind == "LOCAL" and no_locals: raise CompileError("opt.unsupported", "LOCAL after NOLOCALS")
      if kind in PARALLEL and r.arg.get("type") not in PARALLEL:
        raise CompileError("opt.parallel", f"axis {axis} ({r.arg.get('type')}) is not independent; it cannot get {kind}")
      sink = _split(sink, r, int(k), kind, bool(top), max(a.arg["id"] for a in axes) + 1)
    elif op == "SWAP":
      if not isinstance(arg, int) or not 0 <= arg < len(axes): raise CompileError("opt.axis", f"SWAP: axis {arg!r} does not exist")
      sink = _swap(sink, r, axes[arg])
    else:
      raise CompileError("opt.unsupported", f"{op} is not implemented for target {target}")
  return sink


def optimize(sink: UOp, target: str = "c", opts=()) -> UOp:
  return apply_opts(initial_types(sink), opts, target)
