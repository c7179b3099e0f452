"""Symbolic simplification of index arithmetic, driven by min_max.

The rules are one table (`RULES`) of (pattern, rewrite). They only touch integer, index
and bool values, whose arithmetic is exact modulo 2^bits (decision int-wrap), so:
  * reassociating and distributing ADD/MUL over constants is always valid;
  * rules that divide, compare or drop a MOD need the value not to wrap, which the
    intervals prove (an interval that could wrap is widened to the whole dtype range);
  * any integer/bool ALU node whose interval is one point is that constant (the
    intervals are sound, spec/derived.yaml `soundness`), which folds constants, proves
    comparisons and removes x//c and x%c when x is in [0, c).
Floats are never rewritten (their rounding is the renderer's business).
"""
from __future__ import annotations
import weakref
from tinyspec.uop import UOp
from tinyspec.frozen import key
from tinyspec.tables import tables
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.props import props, const
from tinyspec.compiler.rewrite import Pat, Matcher, graph_rewrite, fold_up

_ALU = None


def _alu_ops() -> frozenset[str]:
  global _ALU
  if _ALU is None:
    _ALU = frozenset(n for n, o in tables().ops.items() if o.category in ("elementwise", "decomposed"))
  return _ALU


def _cls(u: UOp) -> str:
  d = props(u).dtype
  return _dt(d).cls if isinstance(d, str) else "tuple"


def _exact(u: UOp) -> bool:
  """Integer-valued (int, uint, index) and known not to have wrapped."""
  p = props(u)
  if not isinstance(p.dtype, str) or _dt(p.dtype).cls not in ("int", "uint", "index"): return False
  d = _dt(p.dtype)
  return p.min_max is not None and (p.min_max[0] > d.min or p.min_max[1] < d.max)


def _is_intlike(u: UOp) -> bool: return _cls(u) in ("int", "uint", "index")


def _c(v, like: UOp) -> UOp: return const(v, props(like).dtype)


# ------------------------------------------------------------------ linear forms
def linear(u: UOp, limit: int = 64):
  """u as sum(k_i * t_i) + c over ADD and MUL-by-constant: ({term: k}, c), or None
  when u has more than `limit` terms. Coefficients are exact (modular) integers."""
  terms: dict[UOp, int] = {}
  c = 0
  stack = [(u, 1)]
  while stack:
    x, k = stack.pop()
    if x.op == "CONST": c += k * int(x.arg["value"]); continue
    if x.op == "ADD": stack.extend((s, k) for s in x.src); continue
    if x.op == "MUL" and x.src[1].op == "CONST": stack.append((x.src[0], k * int(x.src[1].arg["value"]))); continue
    terms[x] = terms.get(x, 0) + k
    if len(terms) > limit: return None
  return {t: k for t, k in terms.items() if k != 0}, c


_KEYS: "weakref.WeakKeyDictionary[UOp, tuple]" = weakref.WeakKeyDictionary()


def _key(t: UOp) -> tuple:
  """A structural sort key (op, arg, sources' keys), so that the order of terms in a sum,
  and with it the rendered source, does not depend on what was compiled before."""
  k = _KEYS.get(t)
  if k is not None: return k
  return fold_up(t, _KEYS, lambda u, below: (u.op, key(u.arg), tuple(below)))


def build_sum(terms: dict, c: int, like: UOp) -> UOp:
  """sum(k * t) + c, terms in a stable order, constant last; wrapped into the dtype."""
  d = _dt(props(like).dtype)
  mod = 1 << d.bits
  def wrap(v):
    if d.cls == "uint": return v % mod
    v %= mod
    return v - mod if v >= mod // 2 else v
  out = None
  for t in sorted(terms, key=_key):
    k = wrap(terms[t])
    if k == 0: continue
    x = t if k == 1 else UOp("MUL", (t, const(k, d.name)))
    out = x if out is None else UOp("ADD", (out, x))
  c = wrap(c)
  if out is None: return const(c, d.name)
  return out if c == 0 else UOp("ADD", (out, const(c, d.name)))


def _nodes_in_sum(u: UOp) -> int:
  n, stack = 0, [u]
  while stack:
    x = stack.pop(); n += 1
    if x.op == "ADD": stack.extend(x.src)
    elif x.op == "MUL" and x.src[1].op == "CONST": stack.append(x.src[0])
  return n


# ------------------------------------------------------------------ rules
def fold_point(x: UOp):
  """An integer/bool ALU node whose interval is a single point is that constant."""
  if x.op == "CONST" or x.op not in _alu_ops(): return None
  p = props(x)
  if not isinstance(p.dtype, str) or _dt(p.dtype).cls == "float" or p.min_max is None or p.shape != (): return None
  lo, hi = p.min_max
  if lo != hi: return None
  return const(lo, p.dtype)


def canon_add(x: UOp):
  """Merge like terms and constants of a sum; rebuild it only when that makes it smaller."""
  if not _is_intlike(x): return None
  lf = linear(x)
  if lf is None: return None
  terms, c = lf
  new = build_sum(terms, c, x)
  if new is x: return None
  return new if _nodes_in_sum(new) < _nodes_in_sum(x) else None


def const_right(x: UOp):
  """Constants go on the right of commutative ops."""
  a, b = x.src
  if a.op == "CONST" and b.op != "CONST": return UOp(x.op, (b, a), x.arg)
  return None


def mul_const(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """(a*c1)*c2 -> a*(c1*c2) (modular arithmetic associates)."""
  if not _is_intlike(x): return None
  return UOp("MUL", (a, _c(int(c1.arg["value"]) * int(c2.arg["value"]), x)))


def mul_distribute(x: UOp, s: UOp, c: UOp):
  """(t0 + t1 + k)*c -> t0*c + t1*c + k*c when the sum has a constant part."""
  if not _is_intlike(x): return None
  lf = linear(s)
  if lf is None or lf[1] == 0: return None
  terms, k = lf
  cv = int(c.arg["value"])
  return build_sum({t: v * cv for t, v in terms.items()}, k * cv, x)


def div_split(x: UOp, a: UOp, c: UOp):
  """floor((sum k_i t_i + r)/c) for c > 0: terms with c | k_i come out of the division,
  the constant's multiples of c too; what is left divides to 0 when it lies in [0, c)."""
  cv = int(c.arg["value"])
  if cv <= 0 or not _exact(a): return None
  lf = linear(a)
  if lf is None: return None
  terms, r = lf
  out_terms = {t: k // cv for t, k in terms.items() if k % cv == 0}
  rest = {t: k for t, k in terms.items() if k % cv != 0}
  q0, r = divmod(r, cv)
  if not rest:
    return build_sum(out_terms, q0, x)
  rem = build_sum(rest, r, a)
  if not _exact(rem): return None
  lo, hi = props(rem).min_max
  if 0 <= lo and hi < cv:
    return build_sum(out_terms, q0, x)
  # a common factor of the remaining coefficients and c cancels (r < g keeps it exact)
  g = cv
  for k in rest.values(): g = _gcd(g, k)
  if g > 1 and 0 <= r < g and _exact(reduced := build_sum({t: k // g for t, k in rest.items()}, 0, a)):
    inner = UOp("IDIV", (reduced, _c(cv // g, x)))
    return build_sum({**out_terms, inner: 1}, q0, x) if (out_terms or q0) else inner
  if not out_terms and q0 == 0: return None
  return build_sum({**out_terms, UOp("IDIV", (rem, c)): 1}, q0, x)


def mod_split(x: UOp, a: UOp, c: UOp):
  """(sum k_i t_i + r) mod c for c > 0: multiples of c drop out; the rest is kept when
  it already lies in [0, c)."""
  cv = int(c.arg["value"])
  if cv <= 0 or not _exact(a): return None
  lf = linear(a)
  if lf is None: return None
  terms, r = lf
  rest = {t: k % cv for t, k in terms.items() if k % cv != 0}
  rem = build_sum(rest, r % cv, a)
  if rem.op == "CONST": return rem
  if not _exact(rem): return None
  lo, hi = props(rem).min_max
  if 0 <= lo and hi < cv: return rem
  if rem is a: return None
  return UOp("MOD", (rem, c))


def div_div(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """floor(floor(a/c1)/c2) = floor(a/(c1*c2)) for positive c1, c2."""
  v1, v2 = int(c1.arg["value"]), int(c2.arg["value"])
  if v1 <= 0 or v2 <= 0 or not _is_intlike(x): return None
  return UOp("IDIV", (a, _c(v1 * v2, x)))


def mod_mod(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """(a mod c1) mod c2 = a mod c2 when c2 divides c1 (both positive)."""
  v1, v2 = int(c1.arg["value"]), int(c2.arg["value"])
  if v1 <= 0 or v2 <= 0 or v1 % v2 != 0 or not _is_intlike(x): return None
  return UOp("MOD", (a, c2))


def max_proven(x: UOp, a: UOp, b: UOp):
  """MAX of integers is the larger source when the intervals order them."""
  if not _is_intlike(x): return None
  (alo, ahi), (blo, bhi) = props(a).min_max, props(b).min_max
  if alo >= bhi: return a
  if blo >= ahi: return b
  return None


def lt_shift(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """a + c1 < c2  ->  a < c2 - c1, when a + c1 cannot wrap."""
  if not _exact(x.src[0]) or not _exact(a): return None
  v, d = int(c2.arg["value"]) - int(c1.arg["value"]), _dt(props(a).dtype)
  if not d.min <= v <= d.max: return None
  return UOp("CMPLT", (a, _c(v, a)))


def lt_scale(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """a*k < c  ->  a < ceil(c/k) for k > 0, when a*k cannot wrap."""
  k, c = int(c1.arg["value"]), int(c2.arg["value"])
  if k <= 0 or not _exact(x.src[0]) or not _exact(a): return None
  return UOp("CMPLT", (a, _c(-((-c) // k), a)))


def bool_and(x: UOp, a: UOp, c: UOp):
  if _cls(x) != "bool": return None
  return a if c.arg["value"] else c


def bool_or(x: UOp, a: UOp, c: UOp):
  if _cls(x) != "bool": return None
  return c if c.arg["value"] else a


def where_const(x: UOp, p: UOp, a: UOp, b: UOp):
  v = p.arg["value"]
  if isinstance(v, str): return a   # NaN and ±inf are nonzero
  return a if v else b


def not_not(x: UOp, a: UOp, t1: UOp, t2: UOp):
  """CMPNE(CMPNE(a, true), true) = a for bool a."""
  if _cls(a) != "bool" or t1.arg["value"] is not True or t2.arg["value"] is not True: return None
  return a


def cast_same(x: UOp, a: UOp):
  return a if props(a).dtype == x.arg else None


def idem(x: UOp, a: UOp):
  return a if _cls(x) in ("bool", "int", "uint", "index") else None


def _gcd(a: int, b: int) -> int:
  import math
  return math.gcd(a, b)


_COMMUTATIVE = ("ADD", "MUL", "AND", "OR", "XOR", "MAX", "CMPNE", "CMPEQ")

RULES = Matcher([
  (Pat.var("x"), fold_point),
  (Pat(_COMMUTATIVE, name="x"), const_right),
  (Pat("ADD", name="x"), canon_add),
  (Pat("MUL", (Pat("MUL", (Pat.var("a"), Pat.cvar("c1"))), Pat.cvar("c2")), name="x"), mul_const),
  (Pat("MUL", (Pat("ADD", name="s"), Pat.cvar("c")), name="x"), mul_distribute),
  (Pat("IDIV", (Pat("IDIV", (Pat.var("a"), Pat.cvar("c1"))), Pat.cvar("c2")), name="x"), div_div),
  (Pat("IDIV", (Pat.var("a"), Pat.cvar("c")), name="x"), div_split),
  (Pat("MOD", (Pat("MOD", (Pat.var("a"), Pat.cvar("c1"))), Pat.cvar("c2")), name="x"), mod_mod),
  (Pat("MOD", (Pat.var("a"), Pat.cvar("c")), name="x"), mod_split),
  (Pat("MAX", (Pat.var("a"), Pat.var("b")), name="x"), max_proven),
  (Pat("CMPLT", (Pat("ADD", (Pat.var("a"), Pat.cvar("c1"))), Pat.cvar("c2")), name="x"), lt_shift),
  (Pat("CMPLT", (Pat("MUL", (Pat.var("a"), Pat.cvar("c1"))), Pat.cvar("c2")), name="x"), lt_scale),
  (Pat("AND", (Pat.var("a"), Pat.cvar("c")), name="x"), bool_and),
  (Pat("OR", (Pat.var("a"), Pat.cvar("c")), name="x"), bool_or),
  (Pat(("AND", "OR"), (Pat.var("a"), Pat.var("a")), name="x"), idem),
  (Pat("WHERE", (Pat.cvar("p"), Pat.var("a"), Pat.var("b")), name="x"), where_const),
  (Pat("WHERE", (Pat.var("p"), Pat.var("a"), Pat.var("a")), name="x"), lambda x, p, a: a),
  (Pat("CMPNE", (Pat("CMPNE", (Pat.var("a"), Pat.cvar("t1"))), Pat.cvar("t2")), name="x"), not_not),
  (Pat("CAST", (Pat.var("a"),), name="x"), cast_same),
])


def simplify(roots, extra: Matcher | None = None):
  """Simplify every integer expression under roots (a UOp or a list)."""
  return graph_rewrite(roots, RULES if extra is None else RULES + extra)
