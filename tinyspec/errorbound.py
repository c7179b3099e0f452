"""How far another implementation's result of a whole graph may lie from the reference's,
under the portable profile: a forward error bound propagated through the graph.

    g2, names = shadow(graph)          # g2 also computes each output's bound: {output: its bound's output}
    ok = within(got, want, bound)      # the elements a bound allows

    from tinyspec.refimpl.errorbound import evaluate_with_bounds   # g2 evaluated by the reference
    outputs, bounds = evaluate_with_bounds(graph, inputs)   # bounds: {output name: float64 array of absolute bounds}

The graph is rewritten into one that also computes, next to every value v, a bound E(v)
on |v' - v| for any v' a backend may give (float64, of v's shape), and the reference
evaluator runs it (refimpl/errorbound.py). The rules come from the tables; the ops with a
rule of their own (reductions, storage, loads, loop indices) register it in BOUND
(tinyspec/dispatch.py), every other op takes the rule of its category:

* a source (CONST, an input buffer) is exact: E = 0;
* a movement op moves E as it moves the value (an INDEX whose index is uncertain: inf);
* any other op is evaluated at the corners of its operands' intervals v - E, v + E (a
  bool with E > 0: both values; in float64) and E is the largest distance from the op's
  value there, plus for a float result its own error: `portable_ulp` (ops.yaml
  `tolerances`, the decomposition's bound for a `decomposed` backend) ulps of the result,
  one more where an operand is inexact (rounding), the smallest normal number where the
  dtype may flush a subnormal result (decision denormals), and inf outside the op's `domain`
  and wherever a decision's allowed results let it be any value (errorbound_where.py: a float
  cast to an integer dtype that cannot hold it, decision cast-float-int; an integer division
  by zero), which then propagates like any other unbounded value;
* a REDUCE adds its operands' E and, for ADD, `ulp_per_element` x n ulps of sum |x| (any
  order of the sum: decision reduce-empty); MAX takes the largest E;
* storage that is stored into gets a shadow buffer (float64) holding the E of what was
  stored, read, ordered (AFTER) and looped over exactly as the storage is, so REG
  accumulators, LOCAL buffers and BARRIERs carry their bounds at every level; a REG
  accumulation's bound takes a form the reference vectorizes (errorbound_accumulate.py).

The bound is first-order in the operands' errors (each op's derivative over [v-E, v+E]
is taken at the interval's ends), which is exact for the monotone ops and an estimate
near a turning point; an output where it is inf (an op outside its domain, an integer
that depends on an inexact value) is left unchecked there. NaN and the sign of zero are
compared as classes by the caller (interop.compare).
"""
from __future__ import annotations
import itertools
import numpy as np
from tinyspec import portable as P
from tinyspec.dispatch import Registry, input_name
from tinyspec.errorbound_forms import FIRST_ORDER, at_float64_resolution   # the corners' maximum in closed form, per op
from tinyspec.errorbound_accumulate import find_accumulations, accumulation_bound
from tinyspec.errorbound_where import Expression, unconstrained   # the tables' domains and allowed `any` results as nodes
from tinyspec.errorbound_calls import called_kernels   # a CALL's kernel is left as it is
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.tolerance import tolerance
from tinyspec.validate import validate

F64 = "float64"
INF = "inf"
BOUND = Registry("error bound")                    # op -> its rule, handler(shadow, i, node); else by category


def _cls(dt) -> str | None: return DTYPES[dt].cls if isinstance(dt, str) and dt in DTYPES else None


def _is_int(dt) -> bool:
  return isinstance(dt, str) and dt in DTYPES and DTYPES[dt].is_int


class _Shadow:
  """The rewrite: the original nodes keep their indices; shadow nodes follow."""

  def __init__(self, g: Graph, decomposed: bool):
    self.g, self.T, self.decomposed = g, tables(), decomposed
    res = validate(g)
    if not res.ok: raise ValueError(f"the graph is invalid: {res.diagnostics[0].format()}")
    self.views, self.level = res.views, res.level
    self.nodes: list[Node] = list(g.nodes)
    self.E: dict[int, int | None] = {}          # value node -> its bound (None: exact)
    self.store_of: dict[int, int] = {}          # storage chain node -> its shadow chain node
    self.shadow_root: dict[int, int] = {}       # storage root -> shadow storage root
    self.after: dict[int, list] = {}            # original node -> shadow nodes to list after it (LINEAR)
    self.repl: dict[int, int] = {}              # a STORE -> GROUP(STORE, its shadow STORE), used in its place
    self.shadow_effect: dict[int, int] = {}     # a STORE -> its shadow STORE
    self.wraps: set[tuple[int, int]] = set()    # (GROUP, STORE) edges that keep the original
    self.slots = [n.arg["slot"] for n in g.nodes if n.op in self.T.input_ops and isinstance(n.arg, dict)]
    self.next_slot = max(self.slots, default=-1) + 1
    self.outputs: dict[str, str] = {}           # output name -> the shadow output's name
    self._memo: dict = {}
    self.cur: int | None = None

  # -------------------------------------------------------------- building
  def add(self, op, src=(), arg=None) -> int:
    key = (op, tuple(src), repr(arg))
    if key in self._memo: return self._memo[key]
    self.nodes.append(Node(op, list(src), arg))
    i = len(self.nodes) - 1
    self._memo[key] = i
    if self.cur is not None: self.after.setdefault(self.cur, []).append(i)
    return i

  def const(self, v, dt=F64) -> int: return self.add("CONST", (), {"value": v, "dtype": dt})

  def f64(self, i: int) -> int:
    dt = self.views[i].dtype if i < len(self.views) else F64
    return i if dt == F64 else self.add("CAST", (i,), F64)

  def abs(self, x: int) -> int: return self.add("WHERE", (self.add("CMPLT", (x, self.const(0.0))), self.add("NEG", (x,)), x))

  def max_(self, a: int, b: int) -> int:   # NaN-safe: a NaN bound is inf
    m = self.add("MAX", (a, b))
    return self.add("WHERE", (self.add("CMPNE", (m, m)), self.const(INF), m))

  def zero_like(self, i: int) -> int:
    """A float64 zero of node i's shape (a STORE wants its value's shape, a vector its width)."""
    v = self.views[i] if i < len(self.views) else None
    if v is None or not getattr(v, "shape", None): return self.const(0.0)
    return self.add("WHERE", (self.add("CMPNE", (i, i)), self.const(0.0), self.const(0.0)))

  # -------------------------------------------------------------- the walk
  def run(self) -> Graph:
    g, kernels = self.g, called_kernels(self.g, self.T)   # a CALL's kernel runs on its arguments as it is: not shadowed
    steps = find_accumulations(self)   # {a register accumulation's ADDs: its bound in vectorizable form, or None: an inner ADD}
    for i, n in enumerate(g.nodes):
      self.cur = i
      if i in kernels: continue
      if i not in steps: BOUND.get(n.op, _by_category)(self, i, n)
      elif steps[i] is not None and not accumulation_bound(self, steps[i]):   # not that form after all: step by step
        for j in steps[i].chain: self.cur = j; BOUND.get(g.nodes[j].op, _by_category)(self, j, g.nodes[j])
    self.cur = None; return self.finish()

  def e(self, j: int) -> int | None: return self.E.get(j)

  def e_or_zero(self, j: int) -> int:
    e = self.E.get(j)
    return e if e is not None else self.zero_like(j)

  # -- values
  def movement(self, i, n):
    od = self.T.ops[n.op]
    if od.storage == "through" and n.src and n.src[0] in self.store_of:   # a read of shadowed storage: the same chain on the shadow
      return self.chain(i, n)
    src = list(n.src)
    es = [self.e(j) for j in src]
    if es and es[0] is None and not any(es[1:]): self.E[i] = None; return
    if n.op != "STACK" and es[0] is not None and self.nodes[es[0]].op == "CONST" and not any(es[1:]):
      self.E[i] = es[0]; return   # a bound that is the same everywhere moves as itself
    sh = [self.e_or_zero(src[0])] + src[1:]
    if n.op == "STACK": sh = [self.e_or_zero(j) for j in src]
    e = self.add(n.op, sh, n.arg)
    if n.op == "INDEX" and any(es[1:]):   # an uncertain index reads anything
      bad = None
      for j in src[1:]:
        if self.e(j) is None: continue
        b = self.add("CMPLT", (self.const(0.0), self.e(j)))
        bad = b if bad is None else self.add("OR", (bad, b))
      e = self.add("WHERE", (bad, self.const(INF), e))
    self.E[i] = e

  def alu(self, i, n):
    self.alu_rule(i, n)
    self.E[i] = unconstrained(self, i, n, self.E.get(i))   # an element an allowed entry lets be any value

  def alu_rule(self, i, n):
    dt = self.views[i].dtype
    src = list(n.src)
    es = [self.e(j) for j in src]
    cls = _cls(dt)
    if n.op == "CAST" and _cls(self.views[src[0]].dtype) == "float" and _is_int(dt):
      if es[0] is None: self.E[i] = None; return
      near = self.add("CMPLT", (self.const(0.0), es[0]))   # an inexact float truncated: off by up to E + 1
      self.E[i] = self.add("WHERE", (near, self.add("ADD", (es[0], self.const(1.0))), self.const(0.0))); return
    if all(e is None for e in es):
      self.E[i] = self.local(i, n) if cls == "float" else None; return
    inexact_ints = [e for j, e in zip(src, es) if e is not None and self.views[j].dtype != "bool"]
    if _is_int(dt) and inexact_ints:
      # an integer from an inexact integer: wraps and bit operations are not monotone, so
      # unbounded wherever an operand is inexact (exact where its bound is 0 at run time)
      self.E[i] = self.add("WHERE", (self.any_positive(inexact_ints), self.const(INF), self.const(0.0))); return
    form = FIRST_ORDER.get(n.op)
    worst = form(self, i, n, [self.e(j) for j in src]) if form is not None else None
    if worst is None: worst = self.corners(i, n, src, es, dt)
    elif cls == "float": worst = at_float64_resolution(self, i, worst)
    self.E[i] = self.add("ADD", (worst, self.local(i, n, moved=worst))) if cls == "float" else worst

  def corners(self, i, n, src, es, dt) -> int:
    """The largest distance from the op's value over its operands' corners: each inexact
    operand at v - E and v + E (a bool: both values), in float64."""
    opts = []
    for j, e in zip(src, es):
      sdt = self.views[j].dtype
      if sdt == "bool":
        opts.append([j] if e is None else [j, self.add("CMPNE", (j, self.add("CMPLT", (self.const(0.0), e))))])
      else:
        x = self.f64(j)
        opts.append([x] if e is None else [self.add("SUB", (x, e)), self.add("ADD", (x, e))])
    nominal = self.add(n.op, [o[0] if self.views[j].dtype == "bool" else self.f64(j) for o, j in zip(opts, src)], self._arg(n, dt))
    as_f64 = (lambda x: self.add("CAST", (x,), F64)) if dt == "bool" else (lambda x: x)
    worst = None
    for combo in itertools.product(*opts):
      c = self.add(n.op, list(combo), self._arg(n, dt))
      d = self.distance(as_f64(c), as_f64(nominal))
      worst = d if worst is None else self.max_(worst, d)
    assert worst is not None
    return worst

  def any_positive(self, es: list) -> int:
    assert es, "no error terms"
    out: int | None = None
    for e in es:
      p = self.add("CMPLT", (self.const(0.0), e))
      out = p if out is None else self.add("OR", (out, p))
    assert out is not None
    return out

  def _arg(self, n, dt):
    if n.op == "CAST" and _cls(dt) in ("float", "int", "uint", "index"): return F64
    return n.arg

  def distance(self, c: int, nominal: int) -> int:
    """|c - nominal| in float64; 0 where both are NaN, inf where one is."""
    a, b = c, nominal
    d = self.abs(self.add("SUB", (a, b)))
    an, bn = self.add("CMPNE", (a, a)), self.add("CMPNE", (b, b))
    both = self.add("AND", (an, bn))
    same = self.add("OR", (both, self.add("CMPEQ", (a, b))))   # equal infinities too
    return self.add("WHERE", (same, self.const(0.0), self.add("WHERE", (self.add("CMPNE", (d, d)), self.const(INF), d))))

  def local(self, i, n, moved: int | None = None) -> int | None:
    """The op's own error on a float result: its portable ulps, one more where its operands
    moved (moved > 0: two roundings of nearby values), the smallest normal where a subnormal
    result may be flushed, inf outside its domain. None: exact."""
    exact = moved is None
    dt = self.views[i].dtype
    try: k, flush, dom = self.op_ulps(n, dt)
    except KeyError: return self.const(INF)
    d = DTYPES[dt]
    inner = self.unrounded_inner_steps(n, dt)
    if k == 0 and not flush and dom is None and exact and not inner: return None
    v = self.f64(i)
    tiny_sub = 2.0 ** (1 - d.exponent_bias - d.mantissa)
    e = self.const(0.0) if k == 0 else \
      self.add("ADD", (self.add("MUL", (self.abs(v), self.const(k * 2.0 ** -d.mantissa))), self.const(k * tiny_sub)))   # (0 ulps of an infinity is 0, not inf * 0)
    if inner:   # a variant that skips the inner roundings (fused, wide): each skipped one, and the result's rounding twice
      e = self.add("ADD", (e, self.add("ADD", (self.add("MUL", (self.abs(v), self.const(2 * 2.0 ** -d.mantissa))), self.const(2 * tiny_sub)))))
      for x in inner:
        e = self.add("ADD", (e, self.add("ADD", (self.add("MUL", (self.abs(x), self.const(2.0 ** -d.mantissa))), self.const(tiny_sub)))))
    if not exact:
      one = self.add("ADD", (self.add("MUL", (self.abs(v), self.const(2.0 ** -d.mantissa))), self.const(tiny_sub)))
      e = self.add("ADD", (e, self.add("WHERE", (self.add("CMPLT", (self.const(0.0), moved)), one, self.const(0.0)))))
    if flush:   # a backend may flush a subnormal result to zero
      tiny = d.normal_range[0]
      e = self.add("ADD", (e, self.add("WHERE", (self.add("CMPLT", (self.abs(v), self.const(tiny))), self.const(tiny), self.const(0.0)))))
    if dom is not None:
      inside = Expression(self, n, dt).build(dom)
      e = self.add("WHERE", (inside, e, self.const(INF)))
    # an infinite result: exact where an operand is infinite (it propagates), unbounded where it overflowed
    finite = [self.add("CMPLT", (self.abs(self.f64(j)), self.const(INF))) for j in n.src if _cls(self.views[j].dtype) == "float"]
    overflow = finite[0] if finite else self.const(True, "bool")
    for f in finite[1:]: overflow = self.add("AND", (overflow, f))
    # a saturating dtype's overflow gives ±finite_max (decision fp8-convert): unbounded there too
    is_inf = self.add("CMPGE" if d.saturate else "CMPEQ", (self.abs(v), self.const(d.normal_range[1] if d.saturate else INF)))
    e = self.add("WHERE", (is_inf, self.add("WHERE", (overflow, self.const(INF), self.const(0.0))), e))
    return self.add("WHERE", (self.add("CMPNE", (v, v)), self.const(0.0), e))   # a NaN result: compared as a class

  def op_ulps(self, n, dt: str) -> tuple:
    """(the op's portable ulps on dtype dt, whether a backend may flush its subnormal result, its domain)."""
    ulp, dom = tolerance(n.op, dt, self.decomposed, "portable")
    return (max(ulp, 1) if n.op in _unrounded_steps(dt) else ulp), P.applies("flush", n.op, dt), dom   # contracted: 1

  def unrounded_inner_steps(self, n, dt: str) -> list[int]:
    """The inner steps of n's decomposition (float64 nodes of their exact values) where a
    decision lets a backend skip their rounding (a `fused` or `wide` variant of n in dtype
    dt: MULACC's product, decision mulacc-rounding); [] where none does."""
    steps = self.T.ops[n.op].decomposition
    if not isinstance(steps, list) or not any(P.applies(v, n.op, dt) for v in ("fused", "wide")): return []
    env = {s.name: self.f64(j) for s, j in zip(self.T.ops[n.op].slots, n.src)}
    out = []
    for st in steps[:-1]:
      x = self.add(st["op"], [env[a] for a in st["src"]])
      if "as" in st: env[st["as"]] = x
      out.append(x)
    return out

  # -- storage
  def storage_shadow(self, root: int) -> int:
    """The shadow buffer of storage root (made when it is first stored into)."""
    if root in self.shadow_root: return self.shadow_root[root]
    n = self.g.nodes[root]
    a = dict(n.arg)
    a["dtype"], a["slot"] = F64, self.next_slot
    self.next_slot += 1
    a["name"] = f"{input_name(n.op, n.arg)}__err"   # names are identifiers (arg.schema)
    s = self.add(n.op, [n.src[0]], a)   # the same shape operand (a symbolic size keeps its bounds sources out)
    self.shadow_root[root] = self.store_of[root] = s
    return s

  def chain(self, i, n):
    """INDEX / AFTER / a marker over shadowed storage: the same node over the shadow."""
    src = list(n.src)
    s0 = self.store_of[src[0]]
    if n.op == "AFTER":
      s = self.add("AFTER", [s0, *[self.shadow_effect.get(d, d) for d in src[1:]]])   # after the shadow STOREs
    else:
      s = self.add(n.op, [s0, *src[1:]], n.arg)
    self.store_of[i] = s
    self.E[i] = s if self.views[i].dtype != "void" else None
    uncertain = [self.e(j) for j in src[1:] if self.e(j) is not None] if n.op == "INDEX" else []
    if uncertain and self.E[i] is not None:   # an index that may be off reads anything (where it may be)
      self.E[i] = self.add("WHERE", (self.any_positive(uncertain), self.const(INF), s))

  def pass_on(self, i, n):
    self.E[i] = self.e(n.src[0])

  def view_of_stored(self, j: int) -> int | None:
    """The same movement view over the shadow of the stored-into storage that node j views, or None."""
    path = []
    while self.T.ops[self.g.nodes[j].op].category == "movement" and self.g.nodes[j].op != "INDEX":
      path.append(j); j = self.g.nodes[j].src[0]
    if not path or self.T.ops[self.g.nodes[j].op].storage is not True or not self.stored(j): return None
    v = self.storage_shadow(j)
    for k in reversed(path):
      m = self.g.nodes[k]
      v = self.add(m.op, [v, *m.src[1:]], m.arg)
    return v

  def stored(self, root: int) -> bool:
    if not hasattr(self, "_stored_roots"):
      self._stored_roots = set()
      for _k, m in enumerate(self.g.nodes):
        if m.op in self.T.write_ops:
          r = _root(self.g, m.src[0], self.T)
          if r is not None: self._stored_roots.add(r)
    return root in self._stored_roots

  def shadow_chain(self, j: int):
    """Shadow the chain from a storage root up to node j (built before the root was shadowed)."""
    path = []
    while j not in self.store_of:
      path.append(j); j = self.g.nodes[j].src[0]
    for k in reversed(path):
      m = self.g.nodes[k]
      self.store_of[k] = self.add(m.op, [self.store_of[m.src[0]], *m.src[1:]], m.arg)

  def wrap(self, i: int, shadow_effect: int):
    """Node i's effect and its shadow's, as one GROUP used wherever i is."""
    grp = self.add("GROUP", (i, shadow_effect))
    self.repl[i], self.shadow_effect[i] = grp, shadow_effect
    self.wraps.add((grp, i))

  # -------------------------------------------------------------- the new roots
  def finish(self) -> Graph:
    g = self.g
    # an AFTER orders its own storage after the original STOREs (the shadow's AFTER: after the shadow ones)
    keep = set(self.wraps) | {(i, j) for i, n in enumerate(g.nodes) if n.op == "AFTER" for j in n.src if j in self.repl}
    new_roots = []
    for r in g.root_indices:
      n = g.nodes[r]
      if n.op == "PROGRAM":   # the LINEAR lists each shadow node after the node it shadows
        listed, seen = [], set()   # a set beside the list: a program of n instructions is not n^2 membership tests
        for j in g.nodes[n.src[0]].src:
          listed.append(j)
          seen.add(j)
          for x in self.after.get(j, ()):
            if x not in seen: listed.append(x); seen.add(x)
        self.nodes.append(Node("LINEAR", list(dict.fromkeys(listed))))
        lin = len(self.nodes) - 1
        keep |= {(lin, j) for j in listed}
        new_roots.append(lin)
        continue
      if n.op == "LINEAR": raise ValueError("a LINEAR root outside a PROGRAM")
      new_roots.append(r)
    # the evaluator names a value root out{its position among all roots}: a void root before
    # or between them (a GROUP of stores) takes a position too; the shadows come after them all
    value_roots = [(p, r) for p, r in enumerate(g.root_indices) if isinstance(self.views[r].dtype, str) and self.views[r].dtype != "void"]
    for k, (p, r) in enumerate(value_roots):
      e = self.E.get(r)
      self.outputs[f"out{p}"] = f"out{len(g.root_indices) + k}"
      new_roots.append(e if e is not None else self.zero_like(r))
    for root, s in self.shadow_root.items():   # REG and LOCAL buffers are private: no output
      root_node = g.nodes[root]
      if root_node.arg.get("addrspace") in (None, "GLOBAL"): self.outputs[input_name(root_node.op, root_node.arg)] = input_name(self.nodes[s].op, self.nodes[s].arg)
    return self.rebuild(new_roots, keep, g.level)

  def rebuild(self, roots: list, keep: set, level: str | None) -> Graph:
    """The graph of the nodes the roots reach, in topological order, each STORE's GROUP in its
    place (except on the edges in keep)."""
    order: list[int] = []
    index: dict[int, int] = {}
    def src_of(i): return [j if (i, j) in keep else self.repl.get(j, j) for j in self.nodes[i].src]
    for r in roots:
      stack = [(r, False)]
      while stack:
        i, done = stack.pop()
        if i in index: continue
        if done: index[i] = len(order); order.append(i); continue
        stack.append((i, True))
        stack += [(j, False) for j in reversed(src_of(i)) if j not in index]
    nodes = [Node(self.nodes[i].op, [index[j] for j in src_of(i)], self.nodes[i].arg) for i in order]
    return Graph(nodes, [index[r] for r in roots], level)


def _by_category(b: _Shadow, i: int, n: Node):
  """The rule of an op without one of its own, from its category: movement moves the
  bound, an elementwise op takes it from its operands' corners, a source is exact; any
  other value (CALL, CUSTOM ...) is unbounded. A void node (END, SINK, BARRIER ...) keeps
  its sources: the rebuild puts a STORE's GROUP in its place."""
  od = b.T.ops[n.op]
  dt = b.views[i].dtype
  if od.category in ("movement", "marker", "multi"): return b.movement(i, n)   # COPY moves a value between devices
  if od.category in ("elementwise", "decomposed") and isinstance(dt, str): return b.alu(i, n)
  if dt == "void" or not isinstance(dt, str): return
  b.E[i] = None if od.category == "source" else b.const(INF)


@BOUND.register("RANGE", "SPECIAL")
def _loop_index(b: _Shadow, i: int, n: Node):
  b.E[i] = None   # a loop or thread index is exact


@BOUND.register("BITCAST")
def _bitcast(b: _Shadow, i: int, n: Node):
  b.E[i] = b.const(INF) if b.e(n.src[0]) is not None else None   # an inexact value's bits are anything


@BOUND.register("REDUCE")
def _reduce(b: _Shadow, i: int, n: Node):
  dt = b.views[i].dtype
  x = n.src[0]
  ex = b.e(x)
  rop = n.arg["op"]
  axes = list(n.arg.get("axes") or ())
  rng = list(n.src[1:])
  def red(op, v): return b.add("REDUCE", [v, *rng], {"op": op, **({"axes": axes} if axes else {})})
  if _cls(dt) != "float":
    b.E[i] = None if ex is None else b.const(INF); return
  if rop == "MAX":
    b.E[i] = None if ex is None else red("MAX", ex); return
  t = b.T.tolerances.get("REDUCE", {}).get("ulp_per_element", 1)
  count = 1
  if axes:
    for a in axes: count *= b.views[x].shape[a]
  else:
    for r in rng:
      mm = b.views[b.g.nodes[r].src[0]].min_max
      count *= max(int(mm[1]), 1) if mm else 1
  eps = 2.0 ** -DTYPES[dt].mantissa
  mag = red("ADD", b.abs(b.f64(x)))
  if rop == "ADD":
    e = b.add("MUL", (mag, b.const(t * count * eps)))
    e = b.add("ADD", (e, b.const(t * count * 2.0 ** (1 - DTYPES[dt].exponent_bias - DTYPES[dt].mantissa))))
    b.E[i] = e if ex is None else b.add("ADD", (red("ADD", ex), e))
    return
  # MUL: relative errors add up
  v = b.abs(b.f64(i))
  rel = b.const(t * count * eps) if ex is None else b.add("ADD", (red("ADD", b.add("MUL", (ex, b.add("RECIP", (b.abs(b.f64(x)),))))), b.const(t * count * eps)))
  b.E[i] = b.add("MUL", (v, rel))


@BOUND.register("AFTER")
def _after(b: _Shadow, i: int, n: Node):
  root = _root(b.g, i, b.T)
  if root is None:   # AFTER(RESHAPE(buffer), STORE ...), AFTER(AFTER(RESHAPE(buffer), STORE), STORE) ...
    j, deps = n.src[0], list(n.src[1:])
    while b.g.nodes[j].op == "AFTER": deps += b.g.nodes[j].src[1:]; j = b.g.nodes[j].src[0]
    if (view := b.view_of_stored(j)) is not None:
      b.E[i] = b.add("AFTER", [view, *[b.shadow_effect.get(d, e if (e := b.E.get(d)) is not None and b.nodes[e].op == "AFTER" else d) for d in deps]]); return   # after the shadow STOREs (an AFTER dep: its shadow)
  if root is not None and root in b.shadow_root and n.src[0] not in b.store_of: b.storage_shadow(root)
  if n.src[0] in b.store_of: return b.chain(i, n)
  if root is not None and root not in b.shadow_root:   # stored into later (a loop's carried read): shadow it now
    if b.stored(root): b.storage_shadow(root); b.shadow_chain(n.src[0]); return b.chain(i, n)
  b.movement(i, n) if b.T.ops[b.g.nodes[n.src[0]].op].category == "movement" else b.pass_on(i, n)


@BOUND.register("INDEX")
def _index(b: _Shadow, i: int, n: Node):
  root = _root(b.g, i, b.T)
  if root is not None and b.stored(root) and n.src[0] not in b.store_of:
    b.storage_shadow(root); b.shadow_chain(n.src[0])
  if n.src[0] in b.store_of: return b.chain(i, n)
  b.movement(i, n)


@BOUND.register("LOAD")
def _load(b: _Shadow, i: int, n: Node):
  src = list(n.src)
  e0 = b.e(src[0])
  if len(src) == 3:
    ealt, eg = b.e(src[1]), b.e(src[2])
    if e0 is None and ealt is None and eg is None: b.E[i] = None; return
    e = b.add("LOAD", [e0 if e0 is not None else b.const(0.0), ealt if ealt is not None else b.const(0.0), src[2]]) \
        if e0 is not None and src[0] in b.store_of else b.add("WHERE", (src[2], b.e_or_zero(src[0]), b.e_or_zero(src[1])))
    if eg is not None: e = b.add("WHERE", (b.add("CMPLT", (b.const(0.0), eg)), b.const(INF), e))
    b.E[i] = e; return
  b.E[i] = e0


@BOUND.register("STORE")
def _store(b: _Shadow, i: int, n: Node):
  root = _root(b.g, n.src[0], b.T)
  if root is None: return
  b.storage_shadow(root)
  if n.src[0] not in b.store_of: b.shadow_chain(n.src[0])
  ev = b.e_or_zero(n.src[1])
  b.wrap(i, b.add("STORE", [b.store_of[n.src[0]], ev, *n.src[2:]]))


@BOUND.register("ATOMICADD")
def _atomicadd(b: _Shadow, i: int, n: Node):
  root = _root(b.g, n.src[0], b.T)
  if root is None: return
  b.storage_shadow(root)
  if n.src[0] not in b.store_of: b.shadow_chain(n.src[0])
  b.wrap(i, b.add("ATOMICADD", [b.store_of[n.src[0]], b.e_or_zero(n.src[1])]))


def _unrounded_steps(dt: str) -> frozenset:
  """Ops whose rounding a backend may skip for dtype dt: the inner steps of an op whose
  portable results include the `fused` variant (MULACC = ADD(MUL(A, B), C): tinygrad
  contracts a*b+c, and so does a C compiler's fp-contract), and the ops whose float16 or
  bfloat16 results may be read unrounded (decision half-intermediates)."""
  T, out = tables(), set()
  for op, dts in P.variant_scope("fused").items():
    steps = T.ops[op].decomposition
    if (dts is None or dt in dts) and isinstance(steps, list): out |= {st["op"] for st in steps[:-1]}
  if any(dts and dt in dts for dts in P.variant_scope(P.WIDE_VARIANT).values()):   # a float16/bfloat16 result read unrounded
    out |= set(T.decisions[P.WIDE_DECISION]["ops"])
  return frozenset(out)


def _root(g: Graph, i: int, T) -> int | None:
  """The storage root of node i through `storage: through` ops, or None."""
  while True:
    o = T.ops[g.nodes[i].op]
    if o.storage is True: return i
    if o.storage == "through" and g.nodes[i].src: i = g.nodes[i].src[0]; continue
    return None


def shadow(graph: Graph, decomposed: bool = True) -> tuple[Graph, dict]:
  """(the graph that also computes the bounds, {output name: its bound's output name})."""
  s = _Shadow(graph, decomposed)
  return s.run(), s.outputs


def within(got, want, bound) -> np.ndarray:
  """Mask of the elements where got is a result the bound allows: |got - want| <= bound
  (as numbers: the sign of zero is free), NaN where want is NaN, anything where the bound
  is inf."""
  got, want = np.asarray(got), np.asarray(want)
  g, w = got.astype(np.float64), want.astype(np.float64)
  b = np.broadcast_to(np.asarray(bound, np.float64), w.shape)
  with np.errstate(invalid="ignore", over="ignore"):
    close = np.abs(g - w) <= b
  same = (g == w) | (np.isnan(g) & np.isnan(w))
  return same | close | np.isinf(b)

