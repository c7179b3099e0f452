"""Split reductions: a long reduce with few outputs becomes two kernels, so that every
compute unit of an OpenCL device takes part.

On C a long reduce is split across threads inside one kernel (GROUP_REDUCE on threads,
then a combining phase). OpenCL has no way to combine the work-groups of one launch
(a work-group's LOCAL memory and BARRIER reach only its own work items), so a reduce
kept in one kernel runs on one work-group: one core of a CPU, one unit of a GPU. Here
such a kernel

    out[o] = f(REDUCE(v(r), r))                      r: n iterations, o: few outputs

becomes

    partial[o, g] = REDUCE(v(g * n/G + i), i)        G groups of n/G: G work items
    out[o]        = f(REDUCE(partial[o, g2], g2))

with G = compute units x `split_reduce` (render.yaml `heuristics`, per target) dividing n.
The group axis g is an output axis like any other, which the heuristics give workgroups
(on a CPU device `group_size` work items sharing each partial, each reading its own block).
On a GPU the partials read grid-stride instead: lane (the work item in the group, L =
`group_size` of them) is a REDUCE range of its own, contiguous in memory, which the heuristics make the
GROUP_REDUCE, and

    partial[o, g] = REDUCE(v(step * G*L + g * L + lane), lane, step)

so consecutive work items read consecutive elements (coalesced) in every step, and the
group's L partial results combine through local memory.
Only reduces whose elements may combine in any order are split (decision reduce-empty:
float ADD reassociates, MAX and integer arithmetic are exact in any order); the partials
have the REDUCE's dtype, so float16/bfloat16 reduces (whose partials would round) stay whole. A kernel qualifies when it is one store nest over an output
INDEX(out, o...) (or a ()-shaped out), holds exactly one REDUCE of at least `split_min`
iterations (constant sizes), and G divides the reduce's outermost range (the one split).
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.literals import const, shape_operand
from tinyspec.rewrite import substitute
from tinyspec.compiler.schedule import Kernel, Schedule
from tinyspec.compiler.analysis.symbolic import simplify
from tinyspec.compiler.passes.heuristics import numbers
from tinyspec.compiler.passes.rangeify import _prune_params
from tinyspec.compiler.passes.layout import dev_name
from tinyspec.compiler.passes.steps import Env, KernelRule, ScheduleContext, rewrite_schedule
from tinyspec.compiler.analysis.axes import ranges, size, reorderable, carried


def _divisor_near(n: int, want: int) -> int | None:
  """The divisor of n closest to want from below (at least 2), else None."""
  for k in range(min(want, n // 2), 1, -1):
    if n % k == 0: return k
  return None


def _store_nest(sink: UOp):
  """(STORE, its output PARAM, the output index ranges, the END or None) of a kernel that
  is one store nest, else None."""
  if sink.op != "SINK" or len(sink.src) != 1: return None
  top = sink.src[0]
  st, end = (top.src[0], top) if top.op == "END" else (top, None)
  if st.op != "STORE" or len(st.src) != 2: return None
  dst = st.src[0]
  if dst.op == "PARAM" and end is None and props(dst).shape == (): return st, dst, [], None
  if dst.op != "INDEX" or dst.src[0].op != "PARAM": return None
  idx = list(dst.src[1:])
  if end is None or list(end.src[1:]) != idx or not all(i.op == "RANGE" for i in idx): return None
  return st, dst.src[0], idx, end


def split_kernel(k: Kernel, groups: int, min_size: int, dev_name: str, ctx: ScheduleContext, lanes: int = 0):
  """[partials kernel, combining kernel] (the partials in a new intermediate of ctx) or None
  when k does not qualify."""
  nest = _store_nest(k.sink)
  if nest is None: return None
  st, out, idx, end = nest
  reds = [u for u in toposort(k.sink) if u.op == "REDUCE"]
  if len(reds) != 1 or not reorderable(reds[0]): return None
  red = reds[0]
  r = red.src[1]
  if carried(k.sink, r): return None      # a value carried across r's iterations: their order is fixed
  n = size(r)
  total = 1
  for x in red.src[1:]: total *= size(x) or 0
  if n is None or total < min_size: return None
  G = _divisor_near(n, groups)
  if G is None: return None
  dt = props(red).dtype
  d = _dt(dt)
  if d.cls == "float" and d.itemsize < 4: return None   # 16-bit partials would round each block's sum
  if any(size(i) is None for i in idx): return None      # symbolic output sizes: no fixed partials buffer
  ids = max(x.arg["id"] for x in ranges(k.sink)) + 1
  g = UOp("RANGE", (const(G, "index"),), {"id": ids, "type": "LOOP"})
  part_shape = tuple(size(i) for i in idx) + (G,)
  P = UOp("PARAM", (shape_operand(part_shape),), {"slot": len(k.args), "dtype": dt})
  if lanes > 1 and n % (G * lanes) == 0:
    # the partials: grid-stride (lane first: the heuristics' GROUP_REDUCE axis)
    lane = UOp("RANGE", (const(lanes, "index"),), {"id": ids + 1, "type": "REDUCE"})
    step = UOp("RANGE", (const(n // (G * lanes), "index"),), {"id": ids + 2, "type": "REDUCE"})
    at = UOp("ADD", (UOp("ADD", (UOp("MUL", (step, const(G * lanes, "index"))), UOp("MUL", (g, const(lanes, "index"))))), lane))
    pred = UOp("REDUCE", (substitute(red.src[0], {r: at}), lane, step, *red.src[2:]), red.arg)
  else:
    # the partials: the same reduce over one group's block of r
    inner = UOp("RANGE", (const(n // G, "index"),), {"id": ids + 1, "type": "REDUCE"})
    value = substitute(red.src[0], {r: UOp("ADD", (UOp("MUL", (g, const(n // G, "index"))), inner))})
    pred = UOp("REDUCE", (value, inner, *red.src[2:]), red.arg)
  pst = UOp("STORE", (UOp("INDEX", (P, *idx, g)), pred))
  psink = UOp("SINK", (UOp("END", (pst, *idx, g)),), {"name": f"{k.sink.arg.get('name', k.name)}_partial"})
  buf = ctx.buffer(part_shape, dt, dev_name)
  psink, pargs, pwrites = _prune_params(simplify(psink), list(k.args) + [buf], {len(k.args)})
  # the combination: f of the reduce over the partials
  g2 = UOp("RANGE", (const(G, "index"),), {"id": ids, "type": "REDUCE"})
  comb = UOp("REDUCE", (UOp("INDEX", (P, *idx, g2)), g2), red.arg)
  csink, cargs, cwrites = _prune_params(simplify(substitute(k.sink, {red: comb})), list(k.args) + [buf], set(k.writes))
  return [Kernel(psink, pargs, pwrites, f"{k.name}_partial"), Kernel(csink, cargs, cwrites, k.name)]


def split_reduce(k: Kernel, ctx: ScheduleContext):
  """A qualifying kernel split in two (see the module doc); None for the others."""
  target, dev = ctx.env.target, ctx.env.dev
  H = numbers(dev)
  per_unit = (H.get("split_reduce") or {}).get(target)
  if not per_unit or k.sink.op != "SINK": return None
  groups = max(2, dev.threads * int(per_unit))
  lanes = min(int(H.get("group_size", 0)), dev.max_local or int(H.get("group_size", 0))) if dev.kind == "gpu" else 0
  return split_kernel(k, groups, int(H.get("split_min", 1 << 18)), dev_name(k.args[next(iter(k.writes))]) if k.writes else "CPU", ctx, lanes)


RULES = (KernelRule("split_reduce", split_reduce),)


def split_reduces(sched: Schedule, target: str, dev) -> Schedule:
  """Every qualifying kernel split in two."""
  return rewrite_schedule(sched, RULES, Env(target, dev))
