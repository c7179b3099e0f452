"""How far another implementation's result of a whole graph may lie from the reference's,
under the portable profile: a forward error bound propagated through the graph.

    bounds = error_bounds(graph, inputs)     # {output name: float64 array of absolute bounds}

The graph is rewritten into one that also computes, next to every value v, a bound E(v)
on |v' - v| for any v' a backend may give (float64, of v's shape), and the reference
evaluator runs it. The rules come from the tables, never from op names:

* a source (CONST, an input buffer) is exact: E = 0;
* a movement op moves E as it moves the value (an INDEX whose index is uncertain: inf);
* any other op is evaluated at the corners of its operands' intervals v - E, v + E (a
  bool with E > 0: both values; in float64) and E is the largest distance from the op's
  value there, plus for a float result its own error: `portable_ulp` (ops.yaml
  `tolerances`, the decomposition's bound for a `decomposed` backend) ulps of the result,
  one more where an operand is inexact (rounding), the smallest normal number where the
  dtype may flush a subnormal result (decision denormals), and inf outside the op's `domain`;
* a REDUCE adds its operands' E and, for ADD, `ulp_per_element` x n ulps of sum |x| (any
  order of the sum: decision reduce-empty); MAX takes the largest E;
* storage that is stored into gets a shadow buffer (float64) holding the E of what was
  stored, read, ordered (AFTER) and looped over exactly as the storage is, so REG
  accumulators, LOCAL buffers and BARRIERs carry their bounds at every level.

The bound is first-order in the operands' errors (each op's derivative over [v-E, v+E]
is taken at the interval's ends), which is exact for the monotone ops and an estimate
near a turning point; an output where it is inf (an op outside its domain, an integer
that depends on an inexact value) is left unchecked there. NaN and the sign of zero are
compared as classes by the caller (interop.compare).
"""
from __future__ import annotations
import ast
import numpy as np
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.tolerance import tolerance
from tinyspec.validate import validate

F64 = "float64"
INF = "inf"


def _cls(dt) -> str | None:
  return DTYPES[dt].cls if isinstance(dt, str) and dt in DTYPES else None


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
    self.slots = [n.arg["slot"] for n in g.nodes if n.op in ("PARAM", "BUFFER") and isinstance(n.arg, dict)]
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
    g = self.g
    for i, n in enumerate(g.nodes):
      self.cur = i
      h = getattr(self, "s_" + n.op, None)
      if h is not None: h(i, n)
      else: self.generic(i, n)
    self.cur = None
    return self.finish()

  def e(self, j: int) -> int | None: return self.E.get(j)

  def e_or_zero(self, j: int) -> int: return self.E.get(j) if self.E.get(j) is not None else self.zero_like(j)

  def generic(self, i, n):
    od = self.T.ops[n.op]
    dt = self.views[i].dtype
    if od.category in ("movement", "marker", "multi"): return self.movement(i, n)   # COPY moves a value between devices
    if od.category in ("elementwise", "decomposed") and isinstance(dt, str): return self.alu(i, n)
    if dt == "void" or not isinstance(dt, str): return
    if od.category == "source" or n.op in ("RANGE", "SPECIAL"): self.E[i] = None; return
    # anything else with a value (CALL, CUSTOM ...): no bound
    self.E[i] = self.const(INF) if any(self.e(j) is not None for j in n.src) or od.category not in ("source",) else None

  # -- values
  def movement(self, i, n):
    od = self.T.ops[n.op]
    if od.storage == "through" and n.src and n.src[0] in self.store_of:   # a read of shadowed storage: the same chain on the shadow
      return self.chain(i, n)
    src = list(n.src)
    es = [self.e(j) for j in src]
    if es and es[0] is None and not any(es[1:]): self.E[i] = None; return
    if n.op == "BITCAST": self.E[i] = self.const(INF) if es[0] is not None else None; return
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
    dt = self.views[i].dtype
    src = list(n.src)
    es = [self.e(j) for j in src]
    cls = _cls(dt)
    if n.op == "CAST" and _cls(self.views[src[0]].dtype) == "float" and cls in ("int", "uint", "index"):
      if es[0] is None: self.E[i] = None; return
      near = self.add("CMPLT", (self.const(0.0), es[0]))   # an inexact float truncated: off by up to E + 1
      self.E[i] = self.add("WHERE", (near, self.add("ADD", (es[0], self.const(1.0))), self.const(0.0))); return
    if all(e is None for e in es):
      self.E[i] = self.local(i, n) if cls == "float" else None; return
    inexact_ints = [e for j, e in zip(src, es) if e is not None and self.views[j].dtype != "bool"]
    if cls in ("int", "uint", "index") and inexact_ints:
      # an integer from an inexact integer: wraps and bit operations are not monotone, so
      # unbounded wherever an operand is inexact (exact where its bound is 0 at run time)
      self.E[i] = self.add("WHERE", (self.any_positive(inexact_ints), self.const(INF), self.const(0.0))); return
    # corners: each inexact operand at v - E and v + E (a bool: both values), in float64
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
    for combo in _product(opts):
      c = self.add(n.op, combo, self._arg(n, dt))
      d = self.distance(as_f64(c), as_f64(nominal))
      worst = d if worst is None else self.max_(worst, d)
    self.E[i] = self.add("ADD", (worst, self.local(i, n, moved=worst))) if cls == "float" else worst

  def any_positive(self, es: list) -> int:
    out = None
    for e in es:
      p = self.add("CMPLT", (self.const(0.0), e))
      out = p if out is None else self.add("OR", (out, p))
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
    try: ulp, dom = tolerance(n.op, dt, self.decomposed, "portable")
    except KeyError: return self.const(INF)
    d = DTYPES[dt]
    k = ulp
    if n.op in _unrounded_steps(dt): k = max(k, 1)   # a backend may contract it into a fused op
    from tinyspec import portable as P
    flush = P.applies("flush", n.op, dt)
    inner = self.unrounded_inner_steps(n, dt)
    if k == 0 and not flush and dom is None and exact and not inner: return None
    v = self.f64(i)
    tiny_sub = 2.0 ** (2 - 2 ** (d.exponent - 1) - d.mantissa)
    e = self.add("MUL", (self.abs(v), self.const(k * 2.0 ** -d.mantissa)))
    e = self.add("ADD", (e, self.const(k * tiny_sub)))
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
      inside = _Domain(self, n, dt).build(dom)
      e = self.add("WHERE", (inside, e, self.const(INF)))
    # an infinite result: exact where an operand is infinite (it propagates), unbounded where it overflowed
    finite = [self.add("CMPLT", (self.abs(self.f64(j)), self.const(INF))) for j in n.src if _cls(self.views[j].dtype) == "float"]
    overflow = finite[0] if finite else self.const(True, "bool")
    for f in finite[1:]: overflow = self.add("AND", (overflow, f))
    is_inf = self.add("CMPEQ", (self.abs(v), self.const(INF)))
    e = self.add("WHERE", (is_inf, self.add("WHERE", (overflow, self.const(INF), self.const(0.0))), e))
    return self.add("WHERE", (self.add("CMPNE", (v, v)), self.const(0.0), e))   # a NaN result: compared as a class

  def unrounded_inner_steps(self, n, dt: str) -> list[int]:
    """The inner steps of n's decomposition (float64 nodes of their exact values) where a
    decision lets a backend skip their rounding (a `fused` or `wide` variant of n in dtype
    dt: MULACC's product, decision mulacc-rounding); [] where none does."""
    from tinyspec import portable as P
    steps = self.T.ops[n.op].decomposition
    if not isinstance(steps, list) or not any(P.applies(v, n.op, dt) for v in ("fused", "wide")): return []
    env = {s.name: self.f64(j) for s, j in zip(self.T.ops[n.op].slots, n.src)}
    out = []
    for st in steps[:-1]:
      x = self.add(st["op"], [env[a] for a in st["src"]])
      if "as" in st: env[st["as"]] = x
      out.append(x)
    return out

  # -- reductions
  def s_REDUCE(self, i, n):
    dt = self.views[i].dtype
    x = n.src[0]
    ex = self.e(x)
    rop = n.arg["op"]
    axes = list(n.arg.get("axes") or ())
    rng = list(n.src[1:])
    def red(op, v): return self.add("REDUCE", [v, *rng], {"op": op, **({"axes": axes} if axes else {})})
    if _cls(dt) != "float":
      self.E[i] = None if ex is None else self.const(INF); return
    if rop == "MAX":
      self.E[i] = None if ex is None else red("MAX", ex); return
    t = self.T.tolerances.get("REDUCE", {}).get("ulp_per_element", 1)
    count = 1
    if axes:
      for a in axes: count *= self.views[x].shape[a]
    else:
      for r in rng:
        mm = self.views[self.g.nodes[r].src[0]].min_max
        count *= max(int(mm[1]), 1) if mm else 1
    eps = 2.0 ** -DTYPES[dt].mantissa
    mag = red("ADD", self.abs(self.f64(x)))
    if rop == "ADD":
      e = self.add("MUL", (mag, self.const(t * count * eps)))
      e = self.add("ADD", (e, self.const(t * count * 2.0 ** (2 - 2 ** (DTYPES[dt].exponent - 1) - DTYPES[dt].mantissa))))
      self.E[i] = e if ex is None else self.add("ADD", (red("ADD", ex), e))
      return
    # MUL: relative errors add up
    v = self.abs(self.f64(i))
    rel = self.const(t * count * eps) if ex is None else self.add("ADD", (red("ADD", self.add("MUL", (ex, self.add("RECIP", (self.abs(self.f64(x)),))))), self.const(t * count * eps)))
    self.E[i] = self.add("MUL", (v, rel))

  # -- storage
  def storage_shadow(self, root: int) -> int:
    """The shadow buffer of storage root (made when it is first stored into)."""
    if root in self.shadow_root: return self.shadow_root[root]
    n = self.g.nodes[root]
    a = dict(n.arg)
    a["dtype"], a["slot"] = F64, self.next_slot
    self.next_slot += 1
    a["name"] = f"{_input_name(n)}__err"   # names are identifiers (arg.schema)
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
    if n.op == "INDEX" and any(self.e(j) for j in src[1:]): self.E[i] = self.const(INF)

  def s_AFTER(self, i, n):
    root = _root(self.g, i, self.T)
    if root is None:   # AFTER(RESHAPE(buffer), STORE ...), AFTER(AFTER(RESHAPE(buffer), STORE), STORE) ...
      j, deps = n.src[0], list(n.src[1:])
      while self.g.nodes[j].op == "AFTER": deps += self.g.nodes[j].src[1:]; j = self.g.nodes[j].src[0]
      if (view := self._view_of_stored(j)) is not None:
        self.E[i] = self.add("AFTER", [view, *deps]); return
    if root is not None and root in self.shadow_root and n.src[0] not in self.store_of: self.storage_shadow(root)
    if n.src[0] in self.store_of: return self.chain(i, n)
    if root is not None and root not in self.shadow_root:   # stored into later (a loop's carried read): shadow it now
      if self._stored(root): self.storage_shadow(root); self._shadow_chain(n.src[0]); return self.chain(i, n)
    self.movement(i, n) if self.T.ops[self.g.nodes[n.src[0]].op].category == "movement" else self._pass(i, n)

  def _pass(self, i, n):
    self.E[i] = self.e(n.src[0])

  def _view_of_stored(self, j: int) -> int | None:
    """The same movement view over the shadow of the stored-into storage that node j views, or None."""
    path = []
    while self.T.ops[self.g.nodes[j].op].category == "movement" and self.g.nodes[j].op != "INDEX":
      path.append(j); j = self.g.nodes[j].src[0]
    if not path or self.T.ops[self.g.nodes[j].op].storage is not True or not self._stored(j): return None
    v = self.storage_shadow(j)
    for k in reversed(path):
      m = self.g.nodes[k]
      v = self.add(m.op, [v, *m.src[1:]], m.arg)
    return v

  def _stored(self, root: int) -> bool:
    if not hasattr(self, "_stored_roots"):
      self._stored_roots = set()
      for k, m in enumerate(self.g.nodes):
        if m.op in ("STORE", "ATOMICADD"):
          r = _root(self.g, m.src[0], self.T)
          if r is not None: self._stored_roots.add(r)
    return root in self._stored_roots

  def _shadow_chain(self, j: int):
    """Shadow the chain from a storage root up to node j (built before the root was shadowed)."""
    path = []
    while j not in self.store_of:
      path.append(j); j = self.g.nodes[j].src[0]
    for k in reversed(path):
      m = self.g.nodes[k]
      self.store_of[k] = self.add(m.op, [self.store_of[m.src[0]], *m.src[1:]], m.arg)

  def s_INDEX(self, i, n):
    root = _root(self.g, i, self.T)
    if root is not None and self._stored(root) and n.src[0] not in self.store_of:
      self.storage_shadow(root); self._shadow_chain(n.src[0])
    if n.src[0] in self.store_of: return self.chain(i, n)
    self.movement(i, n)

  def s_LOAD(self, i, n):
    src = list(n.src)
    e0 = self.e(src[0])
    if len(src) == 3:
      ealt, eg = self.e(src[1]), self.e(src[2])
      if e0 is None and ealt is None and eg is None: self.E[i] = None; return
      e = self.add("LOAD", [e0 if e0 is not None else self.const(0.0), ealt if ealt is not None else self.const(0.0), src[2]]) \
          if e0 is not None and src[0] in self.store_of else self.add("WHERE", (src[2], self.e_or_zero(src[0]), self.e_or_zero(src[1])))
      if eg is not None: e = self.add("WHERE", (self.add("CMPLT", (self.const(0.0), eg)), self.const(INF), e))
      self.E[i] = e; return
    self.E[i] = e0

  def s_STORE(self, i, n):
    root = _root(self.g, n.src[0], self.T)
    if root is None: return
    self.storage_shadow(root)
    if n.src[0] not in self.store_of: self._shadow_chain(n.src[0])
    ev = self.e_or_zero(n.src[1])
    self.wrap(i, self.add("STORE", [self.store_of[n.src[0]], ev, *n.src[2:]]))

  def wrap(self, i: int, shadow_effect: int):
    """Node i's effect and its shadow's, as one GROUP used wherever i is."""
    grp = self.add("GROUP", (i, shadow_effect))
    self.repl[i], self.shadow_effect[i] = grp, shadow_effect
    self.wraps.add((grp, i))

  def s_ATOMICADD(self, i, n):
    root = _root(self.g, n.src[0], self.T)
    if root is None: return
    self.storage_shadow(root)
    if n.src[0] not in self.store_of: self._shadow_chain(n.src[0])
    self.wrap(i, self.add("ATOMICADD", [self.store_of[n.src[0]], self.e_or_zero(n.src[1])]))

  # END, GROUP, BARRIER, SINK keep their sources: the rebuild puts a STORE's GROUP in its place
  def s_END(self, i, n): pass
  def s_GROUP(self, i, n): pass
  def s_BARRIER(self, i, n): pass
  def s_RANGE(self, i, n): self.E[i] = None
  def s_SPECIAL(self, i, n): self.E[i] = None
  def s_CONST(self, i, n): self.E[i] = None
  def s_VCONST(self, i, n): self.E[i] = None
  def s_BINARY(self, i, n): self.E[i] = None
  def s_BUFFER(self, i, n): self.E[i] = None
  def s_PARAM(self, i, n): self.E[i] = None
  def s_SINK(self, i, n): pass
  def s_IF(self, i, n): pass
  def s_ENDIF(self, i, n): pass
  def s_LINEAR(self, i, n): pass
  def s_PROGRAM(self, i, n): pass
  def s_SOURCE(self, i, n): pass

  # -------------------------------------------------------------- the new roots
  def finish(self) -> Graph:
    g = self.g
    # an AFTER orders its own storage after the original STOREs (the shadow's AFTER: after the shadow ones)
    keep = set(self.wraps) | {(i, j) for i, n in enumerate(g.nodes) if n.op == "AFTER" for j in n.src if j in self.repl}
    new_roots = []
    for r in g.root_indices:
      n = g.nodes[r]
      if n.op == "PROGRAM":   # the LINEAR lists each shadow node after the node it shadows
        listed = []
        for j in g.nodes[n.src[0]].src:
          listed.append(j)
          listed += [x for x in self.after.get(j, ()) if x not in listed]
        self.nodes.append(Node("LINEAR", _dedup(listed)))
        lin = len(self.nodes) - 1
        keep |= {(lin, j) for j in listed}
        new_roots.append(lin)
        continue
      if n.op == "LINEAR": raise ValueError("a LINEAR root outside a PROGRAM")
      new_roots.append(r)
    value_roots = [r for r in g.root_indices if isinstance(self.views[r].dtype, str) and self.views[r].dtype != "void"]
    for k, r in enumerate(value_roots):
      e = self.E.get(r)
      self.outputs[f"out{k}"] = f"out{len(value_roots) + k}"
      new_roots.append(e if e is not None else self.zero_like(r))
    for root, s in self.shadow_root.items():   # REG and LOCAL buffers are private: no output
      if g.nodes[root].arg.get("addrspace") in (None, "GLOBAL"): self.outputs[_input_name(g.nodes[root])] = _input_name(self.nodes[s])
    return self.rebuild(new_roots, keep, g.level)

  def rebuild(self, roots: list, keep: set, level: str) -> Graph:
    """The graph of the nodes the roots reach, in topological order, each STORE's GROUP in its
    place (except on the edges in keep)."""
    order, index = [], {}
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


class _Domain:
  """A tolerance `domain` expression (ops.yaml: NumPy syntax over slot names, abs, log2,
  trunc, isfinite, normal) built as graph nodes in float64."""

  def __init__(self, sh: _Shadow, n, dt):
    self.sh, self.n, self.dt = sh, n, dt
    slots = [s.name for s in sh.T.ops[n.op].slots]
    self.names = {name: sh.f64(j) for name, j in zip(slots, n.src)}

  def build(self, expr: str) -> int:
    return self.node(ast.parse(expr, mode="eval").body)

  def node(self, t) -> int:
    sh = self.sh
    if isinstance(t, ast.Name): return self.names[t.id]
    if isinstance(t, ast.Constant): return sh.const(float(t.value))
    if isinstance(t, ast.BinOp):
      a, b = self.node(t.left), self.node(t.right)
      ops = {ast.BitAnd: "AND", ast.BitOr: "OR", ast.Mult: "MUL", ast.Add: "ADD", ast.Sub: "SUB", ast.Div: "DIV"}
      return sh.add(ops[type(t.op)], (a, b))
    if isinstance(t, ast.Compare) and len(t.ops) == 1:
      a, b = self.node(t.left), self.node(t.comparators[0])
      op = type(t.ops[0])
      return sh.add({ast.Lt: "CMPLT", ast.Gt: "CMPGT", ast.LtE: "CMPLE", ast.GtE: "CMPGE", ast.Eq: "CMPEQ", ast.NotEq: "CMPNE"}[op], (a, b))
    if isinstance(t, ast.UnaryOp) and isinstance(t.op, ast.USub): return sh.add("NEG", (self.node(t.operand),))
    if isinstance(t, ast.Call):
      f, args = t.func.id, [self.node(a) for a in t.args]
      if f == "abs": return sh.abs(args[0])
      if f == "log2": return sh.add("LOG2", (args[0],))
      if f == "trunc": return sh.add("TRUNC", (args[0],))
      if f == "isfinite": return sh.add("CMPLT", (sh.abs(args[0]), sh.const(INF)))
      if f == "normal":
        lo, hi = DTYPES[self.dt].normal_range
        a = sh.abs(args[0])
        return sh.add("AND", (sh.add("CMPGE", (a, sh.const(lo))), sh.add("CMPLE", (a, sh.const(hi)))))
    raise ValueError(f"domain expression {ast.dump(t)} is not understood")


def _unrounded_steps(dt: str) -> frozenset:
  """Ops whose rounding a backend may skip for dtype dt: the inner steps of an op whose
  portable results include the `fused` variant (MULACC = ADD(MUL(A, B), C): tinygrad
  contracts a*b+c, and so does a C compiler's fp-contract), and the ops whose float16 or
  bfloat16 results may be read unrounded (decision half-intermediates)."""
  from tinyspec import portable as P
  from tinyspec.refimpl.widen import VARIANT, DECISION
  T, out = tables(), set()
  for op, dts in P.variant_scope("fused").items():
    steps = T.ops[op].decomposition
    if (dts is None or dt in dts) and isinstance(steps, list): out |= {st["op"] for st in steps[:-1]}
  if any(dts and dt in dts for dts in P.variant_scope(VARIANT).values()):   # a float16/bfloat16 result read unrounded
    out |= set(T.decisions[DECISION]["ops"])
  return frozenset(out)


def _product(opts):
  out = [[]]
  for o in opts: out = [c + [x] for c in out for x in o]
  return out


def _dedup(xs):
  return list(dict.fromkeys(xs))


def _root(g: Graph, i: int, T) -> int | None:
  """The storage root of node i through `storage: through` ops, or None."""
  while True:
    o = T.ops[g.nodes[i].op]
    if o.storage is True: return i
    if o.storage == "through" and g.nodes[i].src: i = g.nodes[i].src[0]; continue
    return None


def _input_name(n) -> str:
  a = n.arg
  return a.get("name") or (f"buf{a['slot']}" if n.op == "BUFFER" else f"param{a['slot']}")


def shadow(graph: Graph, decomposed: bool = True) -> tuple[Graph, dict]:
  """(the graph that also computes the bounds, {output name: its bound's output name})."""
  s = _Shadow(graph, decomposed)
  return s.run(), s.outputs


def evaluate_with_bounds(graph: Graph, inputs: dict, decomposed: bool = True) -> tuple[dict, dict]:
  """(the reference's outputs, {output name: float64 array of absolute bounds}) from one
  evaluation of the rewritten graph."""
  from tinyspec.refimpl import evaluate
  sg, names = shadow(graph, decomposed)
  out = evaluate(sg, dict(inputs))
  bounds = {k: np.asarray(out[v], np.float64) for k, v in names.items() if v in out}
  shadows = set(names.values())
  return {k: v for k, v in out.items() if k not in shadows}, bounds


def error_bounds(graph: Graph, inputs: dict, decomposed: bool = True) -> dict:
  """{output name: float64 array of absolute bounds} for the graph's outputs (integer and
  bool ones too: 0 where they are exact), evaluated by the reference evaluator."""
  return evaluate_with_bounds(graph, inputs, decomposed)[1]


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
