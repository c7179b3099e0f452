"""The error bound of a register accumulation (`acc = acc + x` in a loop, tinygrad's REG
accumulators) in a form the reference evaluates as one vectorized accumulation.

tinyspec/errorbound.py bounds `v = acc + x` by E(acc) + E(x) + K ulps of |v|: a rounding
term that depends on the accumulator's running value, so the shadow's update is no plain
accumulation and the loop would be stepped one iteration at a time (refimpl/loops.py).
Here |v| is replaced by a bound that needs no running value. With N roundings from the
accumulator's initialisation to `init` to the end of the loops its AFTER lists (decision
kernel-loops: only those carry it), and u the unit roundoff, at any step t

    |acc_t| <= (|init| + sum over the steps so far of |x|) * exp(N u)

(each rounding grows the sum's magnitude by at most a factor 1 + u), so the rounding terms of
all steps up to t, sum over s <= t of K (eps |acc_s| + tiny), are at most the sum over
s <= t of K (eps exp(N u) (N |x_s| + |init|) + tiny). Each step then adds

    c = E(x) + K (eps exp(N u) (N |x| + |init|) + tiny)   (+ the smallest normal where flushing applies)

to the accumulator's bound, a plain ADD accumulation whose contribution reads no carried
value; at every step the bound is at least what the step-by-step rule gives, and at most
about twice what the REDUCE rule gives the same terms (where the partial sums cancel, far
more than the step-by-step rule's: the price of not reading them). K is the op's
portable ulps, one more where anything may be inexact (what `moved` adds per step); a
contribution that may overflow (|x| + |init| >= the largest finite / (N + 1): the sum could
reach it) or is NaN makes the bound inf, as an overflow does step by step. An unrolled chain
`acc + x0 + x1` counts each ADD as a step.

An integer sum is exact (bound 0) until a term may be inexact, then anything (inf), as step
by step: its contribution is 0 or inf.

Only the plain shape is taken: STORE(T, ADD(... ADD(LOAD(T), x0) ..., xk)) where T indexes
at constant places through an AFTER that lists loops, the STOREs that initialise T's place
are that AFTER's dependencies, no other STORE writes T's place and no other AFTER carries it
over other loops; anything else keeps the step-by-step rule. A float accumulation of that
shape also keeps it where stepping its loop pays (accumulation_bound: a lone loop nest,
cheap to step), since that rule is tighter.
"""
from __future__ import annotations
import math
from tinyspec.dtypes import DTYPES

F64, INF = "float64", "inf"
# The step-by-step rule makes the reference step an accumulation's loop one iteration at a
# time (refimpl/loops.py), running every node that varies along the loop once per iteration:
# the float accumulations of a graph keep it, in node order, while their stepping costs at
# most STEP_BUDGET node-iterations in all (measured at 70-90 us each: about 1.5 s, far below
# the suite's 60 s per graph) and each one's loop nest holds no other accumulation (see
# accumulation_bound). The closed form costs one vectorized pass whatever the length.
STEP_BUDGET = 1 << 14
_UNLISTED = ("LINEAR", "SINK")   # nodes that list others without using their values


class Accumulation:
  """The update `node` = ADD chain over `terms` from the carried `read` of `target`, run
  `steps` times (each of `len(terms)` roundings) after the STOREs `inits`."""
  __slots__ = ("node", "read", "target", "terms", "chain", "inits", "steps", "ranges", "stepping_cost", "nested", "stepped")

  def __init__(self, node, read, target, terms, chain, inits, steps, ranges):
    self.node, self.read, self.target, self.terms, self.chain, self.inits, self.steps = node, read, target, terms, chain, inits, steps
    self.ranges = ranges          # the loops the accumulator is carried over
    self.stepping_cost = 0        # node-iterations of stepping those loops (steps x the nodes varying along them)
    self.nested = False           # another accumulation's loop encloses or lies inside them
    self.stepped = False          # a float accumulation whose stepping pays: it keeps the step-by-step rule


def find_accumulations(b) -> dict:
  """{node: Accumulation (for the chain's last ADD) or None (an inner ADD of the chain)}."""
  g = b.g
  users: dict[int, list] = {}
  for i, n in enumerate(g.nodes):
    if n.op in _UNLISTED: continue
    for j in n.src: users.setdefault(j, []).append(i)
  out: dict = {}
  for s, n in enumerate(g.nodes):
    if n.op != "STORE" or len(n.src) != 2: continue
    acc = _match(b, users, s)
    if acc is None: continue
    out[acc.node] = acc
    for j in acc.chain[:-1]: out[j] = None
  _price(b, [a for a in out.values() if a is not None])
  return out


def _price(b, accs: list) -> None:
  """Each accumulation's stepping cost, whether it is nested with another, and whether it
  is stepped (see STEP_BUDGET): a loop's nodes are those that vary along it (depend on its
  RANGE before its END)."""
  g = b.g
  bit = {r: 1 << k for k, r in enumerate(sorted({r for a in accs for r in a.ranges}))}
  varies: list[int] = []
  for i, n in enumerate(g.nodes):
    m = bit.get(i, 0)
    for j in n.src: m |= varies[j]
    if n.op == "END": m &= ~sum(bit.get(j, 0) for j in n.src[1:])
    varies.append(m)
  for a in accs:
    own = sum(bit[r] for r in a.ranges)
    a.stepping_cost = a.steps * sum(1 for m in varies if m & own)
    others = [o for o in accs if o is not a and not set(o.ranges) & set(a.ranges)]
    a.nested = any(varies[o.node] & own or varies[a.node] & sum(bit[r] for r in o.ranges) for o in others)
  spent = 0
  for a in sorted(accs, key=lambda a: a.node):
    if DTYPES[b.views[a.node].dtype].cls != "float" or a.nested or spent + a.stepping_cost > STEP_BUDGET: continue
    a.stepped, spent = True, spent + a.stepping_cost


def _match(b, users, s) -> Accumulation | None:
  g = b.g
  target, v = g.nodes[s].src
  dt = b.views[v].dtype
  if not isinstance(dt, str) or dt not in DTYPES or DTYPES[dt].cls not in ("float", "int", "uint"): return None
  chain: list[int] = []
  terms: list[int] = []
  x = v
  while True:   # from the stored value down the ADDs to the read of the target
    n = g.nodes[x]
    if n.op != "ADD" or users.get(x) != [chain[-1] if chain else s]: return None
    chain.append(x)
    a, c = n.src
    if _reads(g, a, target): read, term = a, c
    elif _reads(g, c, target): read, term = c, a
    elif g.nodes[a].op == "ADD": x, term, read = a, c, None
    elif g.nodes[c].op == "ADD": x, term, read = c, a, None
    else: return None
    terms.append(term)
    if read is not None: break
  if users.get(read) != [chain[-1]]: return None
  after = _carried_after(b, target)
  if after is None: return None
  inits = [d for d in g.nodes[after].src[1:] if g.nodes[d].op == "STORE" and _same_place(b, g.nodes[d].src[0], target)]
  if not inits or not _alone(b, s, inits, target): return None
  if not _no_other_carry(b, after, inits): return None
  steps = 1
  for r in _listed(g, after):
    mm = b.views[g.nodes[r].src[0]].min_max
    if not mm or not isinstance(mm[1], int): return None
    steps *= max(int(mm[1]), 1)
  return Accumulation(chain[0], read, target, terms[::-1], chain[::-1], inits, steps, tuple(_listed(g, after)))


def _reads(g, j, target) -> bool:
  """j loads target's place: LOAD(target), or LOAD of an INDEX of the same node with the same indices."""
  n = g.nodes[j]
  if n.op != "LOAD" or len(n.src) != 1: return False
  t, u = g.nodes[n.src[0]], g.nodes[target]
  return n.src[0] == target or (t.op == u.op == "INDEX" and tuple(t.src) == tuple(u.src))


def _carried_after(b, target) -> int | None:
  """The AFTER that the target's chain indexes through, when it lists a loop."""
  g = b.g
  j = target
  while g.nodes[j].op in ("INDEX", "AFTER") and g.nodes[j].src:
    if g.nodes[j].op == "AFTER": return j if _listed(g, j) else None
    j = g.nodes[j].src[0]
  return None


def _listed(g, after) -> list:
  out = []
  for j in g.nodes[after].src[1:]:
    while g.nodes[j].op in ("CAST", "BITCAST") and g.nodes[j].src: j = g.nodes[j].src[0]
    if g.nodes[j].op == "RANGE": out.append(j)
  return out


def _place(b, t):
  """(storage root, the index operands as comparable keys) of a STORE target; a key is a
  constant's value or ('n', node) for anything else."""
  g, keys = b.g, []
  while g.nodes[t].op in ("INDEX", "AFTER") and g.nodes[t].src:
    if g.nodes[t].op == "INDEX":
      for j in g.nodes[t].src[1:]:
        mm = b.views[j].min_max
        keys.append(mm[0] if mm and mm[0] == mm[1] and not b.views[j].shape else ("n", j))
    t = g.nodes[t].src[0]
  return t, tuple(keys)


def _same_place(b, t1, t2) -> bool:
  (r1, k1), (r2, k2) = _place(b, t1), _place(b, t2)
  return r1 == r2 and k1 == k2 and not any(isinstance(k, tuple) for k in k1)


def _alone(b, s, inits, target) -> bool:
  """No STORE besides s and the inits may write target's place: every other STORE into its
  storage writes another constant place."""
  root, keys = _place(b, target)
  if any(isinstance(k, tuple) for k in keys): return False
  for i, n in enumerate(b.g.nodes):
    if n.op not in b.T.write_ops or i == s or i in inits: continue
    r, k = _place(b, n.src[0])
    if r == root and (k == keys or any(isinstance(x, tuple) for x in k) or len(k) != len(keys)): return False
  return True


def _no_other_carry(b, after, inits) -> bool:
  """The accumulator carries over the loops `after` lists alone (decision kernel-loops: only an
  AFTER listing a loop carries it): any other AFTER of its storage lists none of the others,
  except those the inits store through (an init inside an outer loop runs in each iteration)."""
  g = b.g
  root = _place(b, after)[0]
  own, init_chains = set(_listed(g, after)), set()
  for s in inits:
    j = g.nodes[s].src[0]
    while g.nodes[j].op in ("INDEX", "AFTER") and g.nodes[j].src: init_chains.add(j); j = g.nodes[j].src[0]
  for i, n in enumerate(g.nodes):
    if n.op == "AFTER" and i not in init_chains and _place(b, i)[0] == root and not set(_listed(g, i)) <= own: return False
  return True


def accumulation_bound(b, acc: Accumulation) -> bool:
  """Set the bound of the chain's last ADD (the shadow's read plus one step's contribution);
  False where the step-by-step rule must bound it:
  - where stepping pays (acc.stepped: the loop nest holds no other accumulation and the
    graph's stepping stays within STEP_BUDGET node-iterations). The step-by-step rule is the tighter one: it adds a
    rounding where an operand's bound is > 0 when it runs, this form wherever it is a node
    (on float32 every ADD's is: a subnormal may flush), so an exact sum keeps bound 0 there
    (a program that reassociates it, as tinygrad's C renderer does, shows). Elsewhere this
    form is sound and costs one vectorized pass, where stepping a nest of loops is what made
    a winograd program's bound take a minute (issue 31);
  - an op with a domain or inner steps (this form has no terms for them)."""
  g = b.g
  i = acc.node
  dt = b.views[i].dtype
  d = DTYPES[dt]
  if d.cls != "float":   # an integer sum is exact until an inexact term makes it anything (as step by step)
    es = [b.e(t) for t in acc.terms if b.e(t) is not None]
    c = b.add("WHERE", (b.any_positive(es), b.const(INF), b.const(0.0))) if es else b.const(0.0)
    return _update(b, acc, c)
  if acc.stepped: return False
  ulps, flush, dom = b.op_ulps(g.nodes[i], dt)
  if dom is not None or b.unrounded_inner_steps(g.nodes[i], dt): return False
  init_vals = [g.nodes[s].src[1] for s in acc.inits]
  exact = all(b.e(t) is None for t in acc.terms) and all(b.e(v) is None for v in init_vals)
  k = ulps if exact and ulps == 0 else ulps + 1   # inexact anywhere: every later step's operands may have moved
  L = len(acc.terms)
  n = acc.steps * L
  eps, tiny = 2.0 ** -d.mantissa, 2.0 ** (1 - d.exponent_bias - d.mantissa)
  grow = math.exp(min(n * eps / 2, 700.0))   # (1 + u)^n: how far rounding may carry a partial sum past its terms' sum
  mag = _sum(b, [b.abs(b.f64(t)) for t in acc.terms])
  init = _largest(b, [b.abs(b.f64(v)) for v in init_vals if not _zero(g, v)])
  parts = [b.e(t) for t in acc.terms if b.e(t) is not None]
  if k: parts += rounding(b, mag, init, k * eps * grow, n, L, k * L * tiny)
  if flush: parts.append(b.const(L * d.normal_range[0]))
  c = _sum(b, parts) if parts else b.const(0.0)
  reach = mag if init is None else b.add("ADD", (mag, init))
  fits = b.add("CMPLT", (reach, b.const(d.normal_range[1] / ((n + 1) * grow))))   # false for NaN too
  return _update(b, acc, b.add("WHERE", (fits, c, b.const(INF))))


def rounding(b, mag, init, scale, n, L, floor) -> list:
  """One iteration's share of the rounding terms: scale (N |x| + L |init|) + floor."""
  weighted = b.add("MUL", (mag, b.const(float(n))))
  if init is not None: weighted = b.add("ADD", (weighted, b.add("MUL", (init, b.const(float(L))))))
  return [b.add("MUL", (weighted, b.const(scale))), b.const(floor)]


def _update(b, acc: Accumulation, c: int) -> bool:
  """The accumulator's bound after a step: its shadow's carried value plus c."""
  shadow_target = b.e(acc.read)
  assert shadow_target in b.store_of.values(), "an accumulator's storage has its shadow"
  b.E[acc.node] = b.add("ADD", (b.add("LOAD", (shadow_target,)), c))
  return True


def _zero(g, v) -> bool:
  """A constant zero (through CASTs)."""
  while g.nodes[v].op == "CAST" and g.nodes[v].src: v = g.nodes[v].src[0]
  n = g.nodes[v]
  return n.op == "CONST" and isinstance(n.arg, dict) and n.arg.get("value") == 0


def _sum(b, xs):
  out = xs[0]
  for x in xs[1:]: out = b.add("ADD", (out, x))
  return out


def _largest(b, xs):
  if not xs: return None
  out = xs[0]
  for x in xs[1:]: out = b.max_(out, x)
  return out
