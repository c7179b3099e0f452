"""Symbolic simplification of index arithmetic, driven by min_max.

The rules are one table (`RULES`) of (pattern, rewrite). They only touch integer, index
and bool values, whose arithmetic is exact modulo 2^bits (decision int-wrap). Every rule
states its precondition and checks it before rewriting; a rule must hold in the dtype's
own wrapping arithmetic, never only in mathematical integers:
  * ADD and MUL are a ring modulo 2^bits, so reassociating and distributing them over
    constants always holds; the constants a rule makes are reduced into the dtype
    (`wrap`), never written out of range (`const` refuses that);
  * a rule that divides, compares or drops a MOD reasons about the mathematical value of
    a sum. A sum of ring ops equals its mathematical value modulo 2^bits whatever wraps
    inside it, so it *is* that value exactly when the value's interval (from the terms'
    sound intervals) fits the dtype (`exact_linear`, `fits`);
  * a new constant a rule computes (a product, a bound) must be a literal of the dtype,
    or the rule declines;
  * any integer/bool ALU node whose interval is one point is that constant (the
    intervals are sound, spec/derived.yaml `soundness`), which folds constants, proves
    comparisons and removes x//c and x%c when x is in [0, c).
Floats are never rewritten (their rounding is the renderer's business).
tests/compiler/test_compiler_rewrites.py checks every rule of the table on edge and random
operands of every integer dtype, narrowed intervals included, against the reference
evaluator.
"""
from __future__ import annotations
import weakref
from tinyspec.uop import UOp, fold_up
from tinyspec.frozen import key
from tinyspec.tables import tables
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.literals import const
from tinyspec.rewrite import Pat, RuleSet, graph_rewrite
import math

_ALU = None


def _alu_ops() -> frozenset[str]:
  global _ALU
  if _ALU is None:
    _ALU = frozenset(n for n, o in tables().ops.items() if o.category in ("elementwise", "decomposed"))
  return _ALU


def _cls(u: UOp) -> str:
  d = props(u).dtype
  return _dt(d).cls if isinstance(d, str) else "tuple"


def _is_intlike(u: UOp) -> bool: return isinstance(props(u).dtype, str) and _dt(props(u).dtype).is_int


def wrap(v: int, dt: str) -> int:
  """The mathematical integer v as a value of integer dtype dt (two's complement, modulo
  2^bits: decision int-wrap)."""
  d = _dt(dt)
  mod = 1 << d.bits
  v %= mod
  return v - mod if d.cls != "uint" and v >= mod // 2 else v


def fits(lo: int, hi: int, dt: str) -> bool:
  """Does [lo, hi] lie in integer dtype dt's range (nothing computed in it wraps)?"""
  d = _dt(dt)
  return d.min <= lo and hi <= d.max


def _c(v, like: UOp) -> UOp:
  """A constant of like's dtype; v must be a literal of that dtype (const refuses others)."""
  return const(v, props(like).dtype)


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


def linear_interval(terms: dict, c: int) -> tuple | None:
  """The mathematical interval of sum(k * t) + c from the terms' (sound) intervals."""
  lo = hi = c
  for t, k in terms.items():
    mm = props(t).min_max
    if mm is None: return None
    a, b = k * mm[0], k * mm[1]
    lo += min(a, b); hi += max(a, b)
  return lo, hi


def exact_linear(u: UOp, limit: int = 64):
  """u's linear form ({term: k}, c) when it is u's value exactly: u is an integer sum
  whose mathematical interval fits its dtype. A sum of ring ops equals its mathematical
  value modulo 2^bits whatever wraps on the way, so then it equals it. Else None."""
  if not _is_intlike(u): return None
  lf = linear(u, limit)
  if lf is None: return None
  iv = linear_interval(*lf)
  return lf if iv is not None and fits(iv[0], iv[1], props(u).dtype) else None


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
  out = None
  for t in sorted(terms, key=_key):
    k = wrap(terms[t], d.name)
    if k == 0: continue
    x = t if k == 1 else UOp("MUL", (t, const(k, d.name)))
    out = x if out is None else UOp("ADD", (out, x))
  c = wrap(c, d.name)
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
# Each rule returns the replacement or None (declined). Its docstring states the identity
# and the precondition under which it holds in the dtype's wrapping arithmetic; the code
# checks that precondition first.
def fold_point(x: UOp):
  """x -> CONST(v) when x's interval is the one point v.
  Precondition: x is an integer/bool ALU node (not float: NaN lies outside every
  interval) with a scalar shape; the interval is sound, so x can only be v."""
  if x.op == "CONST" or x.op not in _alu_ops(): return None
  p = props(x)
  if not isinstance(p.dtype, str) or _dt(p.dtype).cls == "float" or p.min_max is None or p.shape != (): return None
  lo, hi = p.min_max
  if lo != hi: return None
  return const(lo, p.dtype)


def canon_add(x: UOp):
  """sum(k_i t_i) + c with like terms merged and the constants summed (a ring modulo
  2^bits: coefficients reduced into the dtype). Precondition: an integer sum; applied
  only when the result is smaller."""
  if not _is_intlike(x): return None
  lf = linear(x)
  if lf is None: return None
  terms, c = lf
  new = build_sum(terms, c, x)
  if new is x: return None
  return new if _nodes_in_sum(new) < _nodes_in_sum(x) else None


def const_right(x: UOp):
  """OP(CONST, y) -> OP(y, CONST) for an op that commutes on the operands' dtype class
  (ops.yaml `commutes`)."""
  a, b = x.src
  if a.op == "CONST" and b.op != "CONST" and _dt(props(a).dtype).cls in tables().ops[x.op].commutes: return UOp(x.op, (b, a), x.arg)
  return None


def mul_const(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """(a*c1)*c2 -> a*wrap(c1*c2): MUL associates modulo 2^bits.
  Precondition: integer dtype; the product constant is reduced into the dtype."""
  if not _is_intlike(x): return None
  return UOp("MUL", (a, _c(wrap(int(c1.arg["value"]) * int(c2.arg["value"]), props(x).dtype), x)))


def mul_distribute(x: UOp, s: UOp, c: UOp):
  """(t0 + t1 + k)*c -> t0*c + t1*c + k*c (a ring modulo 2^bits).
  Precondition: integer dtype and the sum has a constant part (else nothing shrinks)."""
  if not _is_intlike(x): return None
  lf = linear(s)
  if lf is None or lf[1] == 0: return None
  terms, k = lf
  cv = int(c.arg["value"])
  return build_sum({t: v * cv for t, v in terms.items()}, k * cv, x)


def div_split(x: UOp, a: UOp, c: UOp):
  """floor((sum k_i t_i + r)/c): the terms with c | k_i and the constant's multiples of c
  come out of the division; what is left divides to 0 when it lies in [0, c), or keeps
  a division (by c/g when g divides every remaining coefficient and c, and r < g).
  Precondition: c >= 1 and a's linear form is exact (exact_linear: its mathematical
  interval fits the dtype), and so is the remainder that stays divided. The quotient of
  an in-range value by c >= 1 is in range, so the rebuilt sum (computed modulo 2^bits)
  is that quotient."""
  cv = int(c.arg["value"])
  if cv < 1 or not _is_intlike(x): return None
  lf = exact_linear(a)
  if lf is None: return None
  terms, r = lf
  out_terms = {t: k // cv for t, k in terms.items() if k % cv == 0}
  rest = {t: k for t, k in terms.items() if k % cv != 0}
  q0, r = divmod(r, cv)
  if not rest:
    return build_sum(out_terms, q0, x)
  rem = build_sum(rest, r, a)
  if exact_linear(rem) is None: return None
  lo, hi = props(rem).min_max
  if 0 <= lo and hi < cv:
    return build_sum(out_terms, q0, x)
  # a common factor of the remaining coefficients and c cancels (r < g keeps it exact)
  g = cv
  for k in rest.values(): g = _gcd(g, k)
  if g > 1 and 0 <= r < g and exact_linear(reduced := build_sum({t: k // g for t, k in rest.items()}, 0, a)) is not None:
    inner = UOp("IDIV", (reduced, _c(cv // g, x)))
    return build_sum({**out_terms, inner: 1}, q0, x) if (out_terms or q0) else inner
  if not out_terms and q0 == 0: return None
  return build_sum({**out_terms, UOp("IDIV", (rem, c)): 1}, q0, x)


def mod_split(x: UOp, a: UOp, c: UOp):
  """(sum k_i t_i + r) mod c: multiples of c drop out; the rest is kept as it is when it
  already lies in [0, c). Precondition: c >= 1, a's linear form and the remainder's are
  exact (their mathematical intervals fit the dtype)."""
  cv = int(c.arg["value"])
  if cv < 1 or not _is_intlike(x): return None
  lf = exact_linear(a)
  if lf is None: return None
  terms, r = lf
  rest = {t: k % cv for t, k in terms.items() if k % cv != 0}
  rem = build_sum(rest, r % cv, a)
  if rem.op == "CONST": return rem
  if exact_linear(rem) is None: return None
  lo, hi = props(rem).min_max
  if 0 <= lo and hi < cv: return rem
  if rem is a: return None
  return UOp("MOD", (rem, c))


def div_div(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """floor(floor(a/c1)/c2) -> floor(a/(c1*c2)).
  Precondition: c1, c2 >= 1 and c1*c2 is a literal of the dtype (an int8
  (a//100)//100 is not a//10000: 10000 is no int8)."""
  v1, v2 = int(c1.arg["value"]), int(c2.arg["value"])
  if v1 < 1 or v2 < 1 or not _is_intlike(x) or v1 * v2 > _dt(props(x).dtype).max: return None
  return UOp("IDIV", (a, _c(v1 * v2, x)))


def mod_mod(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """(a mod c1) mod c2 -> a mod c2 (floor mod).
  Precondition: c1, c2 >= 1 and c2 divides c1."""
  v1, v2 = int(c1.arg["value"]), int(c2.arg["value"])
  if v1 < 1 or v2 < 1 or v1 % v2 != 0 or not _is_intlike(x): return None
  return UOp("MOD", (a, c2))


def max_proven(x: UOp, a: UOp, b: UOp):
  """MAX(a, b) -> the larger source.
  Precondition: integers whose intervals order them (a >= b everywhere, or b >= a)."""
  if not _is_intlike(x): return None
  (alo, ahi), (blo, bhi) = props(a).min_max, props(b).min_max
  if alo >= bhi: return a
  if blo >= ahi: return b
  return None


def lt_shift(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """a + c1 < c2 -> a < c2 - c1.
  Precondition: integers; a + c1 does not wrap (a's interval shifted by c1 fits the
  dtype) and c2 - c1 is a literal of the dtype."""
  if not _is_intlike(a): return None
  dt, (lo, hi) = props(a).dtype, props(a).min_max
  k, v = int(c1.arg["value"]), int(c2.arg["value"]) - int(c1.arg["value"])
  if not fits(lo + k, hi + k, dt) or not fits(v, v, dt): return None
  return UOp("CMPLT", (a, _c(v, a)))


def lt_scale(x: UOp, a: UOp, c1: UOp, c2: UOp):
  """a*k < c -> a < ceil(c/k).
  Precondition: integers, k >= 1 and a*k does not wrap (a's interval times k fits the
  dtype); ceil(c/k) lies between c and 0, so it is a literal of the dtype."""
  if not _is_intlike(a): return None
  k, c = int(c1.arg["value"]), int(c2.arg["value"])
  dt, (lo, hi) = props(a).dtype, props(a).min_max
  if k < 1 or not fits(lo * k, hi * k, dt): return None
  return UOp("CMPLT", (a, _c(-((-c) // k), a)))


def bool_and(x: UOp, a: UOp, c: UOp):
  """a AND true -> a, a AND false -> false. Precondition: bool."""
  if _cls(x) != "bool": return None
  return a if c.arg["value"] else c


def bool_or(x: UOp, a: UOp, c: UOp):
  """a OR true -> true, a OR false -> a. Precondition: bool."""
  if _cls(x) != "bool": return None
  return c if c.arg["value"] else a


def where_const(x: UOp, p: UOp, a: UOp, b: UOp):
  """WHERE(CONST p, a, b) -> a when p is true, else b (the condition is a bool:
  decision where-cond). No precondition."""
  v = p.arg["value"]
  if isinstance(v, str): return a   # NaN and ±inf are nonzero
  return a if v else b


def not_not(x: UOp, a: UOp, t1: UOp, t2: UOp):
  """CMPNE(CMPNE(a, true), true) = a for bool a."""
  if _cls(a) != "bool" or t1.arg["value"] is not True or t2.arg["value"] is not True: return None
  return a


def cast_same(x: UOp, a: UOp):
  """CAST(a) to a's own dtype -> a. No precondition."""
  return a if props(a).dtype == x.arg else None


def idem(x: UOp, a: UOp):
  """a AND a -> a, a OR a -> a. Precondition: bool or integer (bitwise)."""
  return a if _cls(x) in ("bool", "int", "uint", "index") else None


def where_same(x: UOp, p: UOp, a: UOp):
  """WHERE(p, a, a) -> a. No precondition (p has no effects)."""
  return a


def _gcd(a: int, b: int) -> int:
  return math.gcd(a, b)


_COMMUTATIVE = tuple(n for n, o in tables().ops.items() if o.commutes)   # ops.yaml `commutes`

RULES = RuleSet.named([
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
  (Pat("WHERE", (Pat.var("p"), Pat.var("a"), Pat.var("a")), name="x"), where_same),
  (Pat("CMPNE", (Pat("CMPNE", (Pat.var("a"), Pat.cvar("t1"))), Pat.cvar("t2")), name="x"), not_not),
  (Pat("CAST", (Pat.var("a"),), name="x"), cast_same),
], "symbolic")


def simplify(roots, extra: RuleSet | None = None):
  """Simplify every integer expression under roots (a UOp or a list)."""
  return graph_rewrite(roots, RULES if extra is None else RULES + extra)
