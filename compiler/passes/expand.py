"""Stage 4, expand: ranges that are not loops any more, and reductions as accumulators.

* UPCAST and UNROLL axes are expanded: a constant-size axis of k iterations becomes k
  copies of the code it encloses (the vector of the Dialect document's "expand the parallel ranges
  into shape", kept as k scalar lanes: C compilers vectorize such lanes when the
  pointers are `restrict` (compiler/render), OpenCL devices vectorize across work items).
  Under an END the copies are grouped. A REDUCE over an UNROLL axis becomes k REDUCEs
  over its other ranges, one per lane, combined after the loop: k independent
  accumulators (the reduce's float rounding may differ from a sequential loop by the
  reassociation, which ops.yaml `tolerances` allows for REDUCE).
* REDUCEs over GROUP_REDUCE axes reduce through workgroup memory, and every REDUCE becomes
  an accumulator: compiler/passes/accumulate.py.
* A MAX reduction of float32/float64 runs on integers: MAX over the IEEE order key
  (bits XOR 0x7fff.. when negative; -0 < +0) of each value, NaNs first made -inf so that
  they never win. Exactly decision reduce-max (the largest non-NaN element, +0 above -0,
  in any order), and integer MAX vectorizes where a float MAX with NaN and signed-zero
  rules does not.
* An END over several ranges becomes nested ENDs of one range each (the loop nest); a
  reduce loop whose steps share LOCAL memory ends each step with a BARRIER, and such a
  kernel is proved race-free (compiler/analysis/parallel.py hazards) or refused.
Each is a step: a rule set with its context (compiler/passes/steps.py), in the order STEPS
lists them; the unrolls and the vectors simplify as they go (their rules run with the
simplifier's, to one fixed point).
"""
from __future__ import annotations
from tinyspec.uop import UOp, toposort
from tinyspec.rewrite import Pat, Rule, RuleSet, substitute
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.analysis.axes import depends, open_ranges
from tinyspec.compiler.analysis.symbolic import RULES as SYMBOLIC, linear
from tinyspec.compiler.analysis.parallel import hazards, WRITES
from tinyspec.compiler.passes.readers import with_identity, identity, fold
from tinyspec.compiler.passes.steps import Env, Step, run_steps
from tinyspec.compiler.passes.accumulate import GROUP_REDUCE, ACCUMULATE, combine, rtype
from tinyspec.compiler.passes.linearize import SPLIT_ENDS

UNROLLED = ("UPCAST", "UNROLL")


# ------------------------------------------------------------------ unrolled axes
class _Unrolling:
  """The axis types to unroll, where each range stands in the kernel (the last one is
  unrolled first: innermost first), and the next free range id (loops copied inside)."""

  def __init__(self, nodes: list, kinds: tuple):
    self.kinds = kinds
    self.position = {u: i for i, u in enumerate(nodes) if u.op == "RANGE"}
    self.next_id = max((u.arg["id"] for u in nodes if u.op == "RANGE"), default=-1) + 1


def _unrolling(kinds: tuple):
  def context(sink: UOp, env) -> _Unrolling | None:
    nodes = toposort(sink)
    return _Unrolling(nodes, kinds) if any(u.op == "RANGE" and u.arg.get("type") in kinds for u in nodes) else None
  return context


def unroll(x: UOp, ctx: _Unrolling):
  """END/REDUCE x over an axis to unroll (the last one in the kernel): k copies of its
  body. A loop closed inside the body gets a range of its own in each copy (one END per
  range); the rest of x's ranges stay (the fixed point unrolls them next)."""
  rs = [r for r in x.src[1:] if r.op == "RANGE" and r.arg.get("type") in ctx.kinds]
  if not rs: return None
  r = max(rs, key=lambda r: ctx.position.get(r, -1))
  if r.src[0].op != "CONST": raise CompileError("compile.form", f"{r.arg['type']} axis {r.arg['id']} needs a constant size", r)
  n = int(r.src[0].arg["value"])
  rest = tuple(s for s in x.src[1:] if s is not r)
  inner = list(dict.fromkeys(y for e in toposort(x.src[0]) if e.op == "END" for y in e.src[1:]))
  copies = []
  for j in range(n):
    fresh = {}
    if j:
      for y in inner:
        fresh[y] = y.replace(arg={**y.arg, "id": ctx.next_id}); ctx.next_id += 1
    copies.append(substitute(x.src[0], {r: const(j, "index"), **fresh}))
  if x.op == "REDUCE":
    op, dt = x.arg["op"], props(x).dtype
    if rest and props(x).shape: return UOp("REDUCE", (combine(fold(op), copies), *rest), x.arg)   # a vector accumulator's lanes run in parallel already: one accumulator
    if rest: return combine(fold(op), [UOp("REDUCE", (c, *rest), x.arg) for c in copies])
    if len(copies) == 1: return copies[0]     # one element: itself (decision reduce-one)
    return with_identity(op, combine(fold(op), copies)) if copies else identity(op, dt)
  body = UOp("GROUP", tuple(copies)) if len(copies) != 1 else copies[0]
  return UOp("END", (body, *rest)) if rest else body


UNROLL = RuleSet([Rule("unroll", Pat(("END", "REDUCE"), name="x"), unroll)], "unroll") + SYMBOLIC


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
  tile, compiler/passes/tiles.py) seen through AFTERs."""
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
      if not all((c.op == "STORE" and len(c.src) == 2 and (c.src[0] is x) != (c.src[1] is x)) or (c.op not in WRITES and c.op != "LOAD") for c in uses.get(x, ())): return False
      continue
    if op == "STORE":
      if x.src[0].op != "INDEX" or len(x.src) != 2 or not depends(x.src[0], u, dep): return False
      continue
    if op == "REDUCE":
      if x.arg["op"] not in V["reduce"] or dt not in V["dtypes"] or any(depends(r, u, dep) or rtype(r) == "GROUP_REDUCE" for r in x.src[1:]): return False
      continue
    if op not in V["ops"] or dt not in V["dtypes"]: return False
  return True


def _vector_axis(sink: UOp, env) -> UOp | None:
  """The UPCAST axis contiguous in memory that becomes vector lanes, when one can (one
  axis: the others are expanded into copies of the vector code); None: none."""
  V = render_tables()["vectors"]
  cands = [r for r in toposort(sink) if r.op == "RANGE" and rtype(r) == "UPCAST" and r.src[0].op == "CONST" and int(r.src[0].arg["value"]) in V["widths"]]
  reduced = {r for x in toposort(sink) if x.op == "REDUCE" for r in x.src[1:]}
  return next((u for u in sorted(cands, key=lambda r: -int(r.src[0].arg["value"])) if u not in reduced and _vectorizable(sink, u)), None)


def vector_lanes(x: UOp, ctx: UOp):
  """The vector axis -> its lanes, an index VCONST 0..k-1."""
  return lanes(int(x.src[0].arg["value"])) if x is ctx else None


def vector_end(x: UOp):
  """An END no longer closes the vector axis (its lanes are one value)."""
  if not any(s.op == "VCONST" for s in x.src[1:]): return None
  rest = tuple(s for s in x.src[1:] if s.op != "VCONST")
  return UOp("END", (x.src[0], *rest)) if rest else x.src[0]


VECTORS = RuleSet([Rule("vector_lanes", Pat("RANGE", name="x"), vector_lanes), Rule("vector_end", Pat("END", name="x"), vector_end)], "vectors") + SYMBOLIC


# ------------------------------------------------------------------ one element
def one_element(x: UOp):
  """A REDUCE over RANGEs that all run once is its value at index 0: one element is itself,
  nothing folded in from the identity (decision reduce-one: -0.0 stays -0.0 under ADD, NaN
  stays NaN under MAX)."""
  rr = x.src[1:]
  if not rr or not all(r.op == "RANGE" and r.src[0].op == "CONST" and r.src[0].arg["value"] == 1 for r in rr): return None
  return substitute(x.src[0], {r: const(0, "index") for r in rr})


ONE_ELEMENT = RuleSet([Rule("one_element", Pat("REDUCE", name="x"), one_element)], "one_element")


# ------------------------------------------------------------------ float MAX on integer keys
_KEYED = {"float32": ("int32", 0x7fffffff, 0x7f800000), "float64": ("int64", 0x7fffffffffffffff, 0x7ff0000000000000)}


def _order_key(b: UOp, it: str, mag: int) -> UOp:
  """The IEEE total-order key of float bits b (an involution: it also maps keys back)."""
  neg = UOp("CMPLT", (b, const(0, it)))
  return UOp("XOR", (b, UOp("WHERE", (neg, const(mag, it), const(0, it)))))


def max_on_integers(x: UOp):
  """A float MAX reduction -> one integer MAX reduction of order keys (see the module doc)."""
  if x.arg["op"] != "MAX" or len(x.src) < 2: return None
  dt = props(x).dtype
  if dt not in _KEYED: return None
  it, mag, inf = _KEYED[dt]
  b = UOp("BITCAST", (x.src[0],), it)
  m = UOp("AND", (b, const(mag, it)))
  neg_inf = UOp("BITCAST", (const("-inf", dt),), it)
  b = UOp("WHERE", (UOp("CMPLT", (const(inf, it), m)), neg_inf, b))   # every NaN made -inf: it never wins
  k = UOp("REDUCE", (_order_key(b, it, mag), *x.src[1:]), {"op": "MAX"})
  k = UOp("MAX", (k, _order_key(neg_inf, it, mag)))        # an empty reduce is -inf
  return UOp("BITCAST", (_order_key(k, it, mag),), dt)


MAX_KEYS = RuleSet([Rule("max_on_integers", Pat("REDUCE", name="x"), max_on_integers)], "max_keys")


# ------------------------------------------------------------------ loop ends
def step_barrier(x: UOp):
  """A reduce loop whose iterations store LOCAL memory and then wait at a BARRIER (a staged
  tile, compiler/passes/tiles.py) ends each iteration with a BARRIER of its own: without it
  the next iteration's stores could overwrite what slower work items still read. (Bottom-
  up: an outer loop's END keeps its inner loops' barriers.)"""
  if len(x.src) != 2 or rtype(x.src[1]) != "REDUCE": return None
  body, r = x.src
  inner = {y for z in toposort(body) if z.op == "END" for y in z.src[1:]}   # loops nested in r (their own ENDs end their steps)
  opened: dict = {}
  if any(b.op == "BARRIER" and r in (o := open_ranges(b, opened)) and not (o & inner) for b in toposort(body)):
    return UOp("END", (UOp("GROUP", (body, UOp("BARRIER", (body,)))), r))
  return None


STEP_BARRIERS = RuleSet([Rule("step_barrier", Pat("END", name="x"), step_barrier)], "step_barriers")


def race_free(sink: UOp, env=None) -> UOp:
  """A kernel that shares LOCAL memory between work items (BARRIERs) must be proved to
  read there only what decision kernel-loops says (compiler/analysis/parallel.py hazards: the
  group reduce's partials, a staged tile per reduce step); else it is refused, never run."""
  if not any(u.op == "BARRIER" for u in toposort(sink)): return sink
  plain, ordered = hazards(sink)
  bad = [a for a in plain + ordered if props(a.storage).addrspace == "LOCAL"]
  if bad: raise CompileError("compile.order", f"a read of LOCAL buffer {bad[0].storage.arg['slot']} may see another work item's or step's store (a race between BARRIERs)", bad[0].node)
  return sink


def _float_max(sink: UOp, env):
  return True if any(u.op == "REDUCE" and u.arg["op"] == "MAX" for u in toposort(sink)) else None


def _has_barrier(sink: UOp, env):
  return True if any(u.op == "BARRIER" for u in toposort(sink)) else None


# float MAX reductions go to integer keys first: once unrolled or grouped, their partials
# combine with the elementwise MAX, whose NaN and zero rules (decision max-nan) are not
# the reduction's (decision reduce-max)
STEPS = (
  Step("one_element", ONE_ELEMENT, once=True),
  Step("max_keys", MAX_KEYS, _float_max, once=True, simplify_after=True),
  Step("vectors", VECTORS, _vector_axis),
  Step("unroll_upcast", UNROLL, _unrolling(("UPCAST",))),
  GROUP_REDUCE,
  Step("unroll", UNROLL, _unrolling(("UNROLL",))),
  ACCUMULATE,
  SPLIT_ENDS,
  Step("step_barriers", STEP_BARRIERS, _has_barrier, once=True),
  race_free,
)


def expand(sink: UOp, tree: bool = False) -> UOp:
  """tree: combine GROUP_REDUCE partials as a tree (render.yaml heuristics
  `group_combine`), not serially."""
  return run_steps(sink, STEPS, Env("", tree=tree))
