"""Stage 4, expand: ranges that are not loops any more, and reductions as accumulators.

* UPCAST and UNROLL axes are expanded: a constant-size axis of k iterations becomes k
  copies of the code it encloses (the vector of the seed's "expand the parallel ranges
  into shape", kept scalar: each lane is its own instruction, which is what both targets
  execute anyway). In a REDUCE the k copies are combined with the reduce op; under an
  END they are grouped.
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
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from compiler.props import props, const, shape_operand, CompileError
from compiler.rewrite import toposort, substitute
from compiler.symbolic import simplify

UNROLLED = ("UPCAST", "UNROLL")


def identity(op: str, dtype: str) -> UOp:
  d = _dt(dtype)
  if op == "ADD": return const(0, dtype)
  if op == "MUL": return const(1, dtype)
  if d.cls == "bool": return const(False, dtype)
  return const("-inf" if d.cls == "float" else d.min, dtype)


def _unroll(sink: UOp) -> UOp:
  """Expand every UPCAST/UNROLL range into copies (innermost first)."""
  while True:
    rs = [u for u in toposort(sink) if u.op == "RANGE" and u.arg.get("type") in UNROLLED]
    if not rs: return sink
    r = rs[-1]
    if r.src[0].op != "CONST": raise CompileError("compile.form", f"{r.arg['type']} axis {r.arg['id']} needs a constant size", r)
    n = int(r.src[0].arg["value"])
    subs = {}
    for u in toposort(sink):
      if u.op not in ("END", "REDUCE") or r not in u.src[1:]: continue
      rest = tuple(s for s in u.src[1:] if s is not r)
      copies = [substitute(u.src[0], {r: const(j, "index")}) for j in range(n)]
      if u.op == "REDUCE":
        op, dt = u.arg["op"], props(u).dtype
        body = copies[0] if copies else identity(op, dt)
        for c in copies[1:]: body = UOp(op, (body, c))
        subs[u] = UOp("REDUCE", (body, *rest), u.arg) if rest else body
      else:
        body = UOp("GROUP", tuple(copies)) if len(copies) != 1 else copies[0]
        subs[u] = UOp("END", (body, *rest)) if rest else body
    sink = simplify(substitute(sink, subs))


def _ranges_in(u: UOp, cache: dict) -> frozenset:
  """The open RANGEs u depends on (END closes its own)."""
  for x in toposort(u):
    if x in cache: continue
    s = frozenset().union(*[cache[y] for y in x.src]) if x.src else frozenset()
    if x.op == "RANGE": s = s | {x}
    elif x.op == "END": s = s - set(x.src[1:])
    cache[x] = s
  return cache[u]


def _accumulate(sink: UOp) -> UOp:
  """REDUCE -> REG accumulators, innermost reductions first."""
  cache: dict = {}
  nacc = 0
  while True:
    reds = [u for u in toposort(sink) if u.op == "REDUCE"]
    if not reds: return sink
    # a REDUCE none of whose sources contain another REDUCE
    inner = {}
    for u in toposort(sink):
      inner[u] = u.op == "REDUCE" or any(inner[s] for s in u.src)
    ready = [u for u in reds if not any(inner[s] for s in u.src)]
    groups: dict[tuple, list] = {}
    for u in ready: groups.setdefault(tuple(sorted(u.src[1:], key=lambda r: r.arg["id"])), []).append(u)
    closed = {r for u in toposort(sink) if u.op == "END" for r in u.src[1:]}
    next_id = max((u.arg["id"] for u in toposort(sink) if u.op == "RANGE"), default=-1) + 1
    subs = {}
    for rr, members in groups.items():
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
        dt = props(red).dtype
        acc = UOp("BUFFER", (shape_operand(()),), {"slot": nacc, "dtype": dt, "device": "REG", "addrspace": "REG"})
        nacc += 1
        outer = sorted(_ranges_in(red, cache) - set(red.src[1:]), key=lambda r: r.arg["id"])
        init = UOp("STORE", (UOp("AFTER", (acc, *outer)) if outer else acc, identity(red.arg["op"], dt)))
        cur = UOp("AFTER", (acc, init, *rr))
        updates.append(UOp("STORE", (acc, UOp(red.arg["op"], (cur, val)))))
        results.append((red, acc))
      end = UOp("END", (updates[0] if len(updates) == 1 else UOp("GROUP", tuple(updates)), *rr))
      for red, acc in results: subs[red] = UOp("AFTER", (acc, end))
    sink = substitute(sink, subs)


def expand(sink: UOp) -> UOp:
  from compiler.linearize import split_ends
  return split_ends(_accumulate(_unroll(sink)))
