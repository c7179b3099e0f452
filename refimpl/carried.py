"""Which loops of a kernel carry a dependency through storage, and which of those are
accumulations: the static half of refimpl/loops.py (run once per scope, in Plan).

The one way a kernel graph says "read what the previous iteration wrote" is an AFTER that
lists the RANGE itself (or a CAST of it) among its dependencies, `AFTER(acc, init, r)`, while
a STORE inside loop r writes the same storage (decision kernel-loops, AFTER.loop). Such an
AFTER *carries* r, unless nothing can see what it carries: it is not read, and the STOREs
through it overwrite every element of the storage before anything reads it, at every
iteration (tinygrad's register re-initialized in each iteration of an outer loop).

A carried loop is an *accumulation* when one END closes every loop carried with it and every
store into the carried storage in the loop is `STORE(T, f(read))` where `read` reads the
carried storage at T's place and f is a chain of one reduce op (ADD, MUL or MAX) applied to
contributions that do not depend on any carried read: OP(OP(read, x0), x1) ...,
MULACC(a, b, read) (ADD with x = a*b), or WHERE(CMPLT(read, y), y, read), which is
MAX(read, y) by decision max-nan. The read may be an INDEX of the carried AFTER or a LOAD of
one. Then the value after each point is one `ufunc.accumulate` over the contributions in
iteration order (refimpl/loops.py); anything else is stepped one iteration at a time.
"""
from __future__ import annotations
from tinyspec.refimpl.errors import EvalError
from tinyspec.refimpl.registry import UNITS, role


def storage_id(nodes, i):
  """Storage roots that name the same storage (the same input, or one register)."""
  n = nodes[i]
  a = n.arg
  if a.get("addrspace", "GLOBAL") != "GLOBAL": return ("local", i)
  return (n.op, a.get("name") or a.get("slot"))


def listed_ranges(nodes, a) -> list:
  """The RANGEs an AFTER lists among its dependencies, each either itself or seen through
  CASTs (an importer that types RANGEs as int lists `CAST(r)`; it orders the same)."""
  out = []
  for j in nodes[a].src[1:]:
    while nodes[j].op in ("CAST", "BITCAST") and nodes[j].src: j = nodes[j].src[0]
    if nodes[j].op == "RANGE": out.append(j)
  return out


def bits(axis_of, ranges) -> int:
  mask = 0
  for r in ranges: mask |= 1 << axis_of[r]
  return mask


def find_carried(plan, nodes):
  """Fill plan.reductions (STORE -> Accumulation), plan.sequential (END -> Stepped),
  plan.in_loop (nodes a stepped loop runs), plan.carried_bits (carried AFTER -> the loop axes
  it carries) and add the deferred updates."""
  plan.reductions, plan.sequential, plan.in_loop, plan.carried_bits = {}, {}, set(), {}
  axes, axis_of = plan.axes, plan.axis_of
  stores: dict = {}
  for i in plan.order:
    if role(nodes[i].op) == "store" and nodes[i].src[0] in plan.root:
      stores.setdefault(storage_id(nodes, plan.root[nodes[i].src[0]]), []).append(i)
  groups: dict[tuple, list] = {}     # the carried RANGEs (outer first) -> the AFTERs carrying exactly them
  sets_of_range, sets_of_storage = {}, {}
  for a in plan.order:
    if role(nodes[a].op) != "after" or a not in plan.root: continue
    sid = storage_id(nodes, plan.root[a])
    rs = {r for r in listed_ranges(nodes, a) if r in axis_of and any(axes[s] >> axis_of[r] & 1 for s in stores.get(sid, ()))}
    if not rs or (a not in plan.read and overwritten(plan, nodes, a, rs, stores.get(sid, ()))): continue
    key = tuple(sorted(rs, key=axis_of.get))
    groups.setdefault(key, []).append(a)
    plan.carried_bits[a] = bits(axis_of, key)
    sets_of_storage.setdefault(sid, set()).add(key)
    for r in key: sets_of_range.setdefault(r, set()).add(key)
  # a loop (or a storage) carried together with different sets of loops is no plain accumulation
  tangled = {key for sets in list(sets_of_range.values()) + list(sets_of_storage.values()) if len(sets) > 1 for key in sets}
  stepped = set()
  for key, afters in groups.items():
    specs = None if key in tangled or not closed_together(plan, nodes, key) else accumulations(plan, nodes, key, afters, stores)
    if specs is None:
      stepped.update(key)
      continue
    for s, spec in specs.items():
      plan.reductions[s] = spec
      plan.deferred.update(spec.deferred)
  if stepped: find_stepped(plan, nodes, stepped)


def closed_together(plan, nodes, ranges) -> bool:
  """Whether one END closes all of `ranges`: an accumulation over loops closed apart is read
  between them (after the inner loop, at each point of the outer one), which its single final
  write does not give; such loops are stepped."""
  ends = [{i for i in plan.order if role(nodes[i].op) == "close" and r in nodes[i].src[1:]} for r in ranges]
  return bool(set.intersection(*ends))


# ------------------------------------------------------------------ a carry nothing sees
def overwritten(plan, nodes, a, ranges, stores) -> bool:
  """AFTER a (not read) carries nothing anyone sees: every use of it is the target of an
  ungated STORE of constant place, those STOREs together write every element of the
  storage, and every other AFTER or STORE of the storage is ordered after all of them and
  inside the loops, or after none of them."""
  covering, stack = [], [a]
  while stack:
    x = stack.pop()
    for c, k in plan.data_uses[x]:
      if role(nodes[c].op) == "store" and k == 0: covering.append(c)
      elif c in plan.root and c not in plan.read and role(nodes[c].op) == "through" and k == 0: stack.append(c)
      else: return False
  view = plan.views[plan.root[a]]
  size = 1
  for d in view.shape: size *= d
  written = set()
  for s in covering:
    place = _constant_place(plan, nodes, s, view.shape)
    if place is None or nodes[s].op != "STORE" or len(nodes[s].src) > 2 or plan.ifs.get(s): return False
    written |= place
  if len(written) != size: return False
  mask = bits(plan.axis_of, ranges)
  reach = _reaching(plan, nodes, set(covering))
  others = [x for x in stores if x not in covering] + [x for x in plan.order if role(nodes[x].op) == "after" and x != a
                                                       and plan.root.get(x) == plan.root[a]]
  return all(not reach[x] or (len(reach[x]) == len(covering) and plan.axes[x] & mask == mask) for x in others)


def constant(plan, j):
  """The value of an integer node whose interval is one point (a CONST, a CAST of one...), else None."""
  v = plan.views[j]
  mm = v.min_max
  if v.shape != () or not mm or mm[0] != mm[1] or not isinstance(mm[0], int) or isinstance(mm[0], bool): return None
  return mm[0]


def _constant_place(plan, nodes, s, shape) -> set | None:
  """The flat elements a STORE's target selects when its indices are constants (None otherwise)."""
  links = plan.chain_links(nodes[s].src[0])
  idx = [j for link in links if role(nodes[link].op) == "through" for j in nodes[link].src[1:]]
  if any(role(nodes[link].op) == "view" for link in links) or len(idx) > len(shape): return None
  if any(constant(plan, j) is None for j in idx): return None
  flat, block = 0, 1
  for d in shape[len(idx):]: block *= d
  stride = block
  for j, n in reversed(list(zip(idx, shape))):
    v = constant(plan, j)
    if not 0 <= v < n: return set()
    flat += v * stride
    stride *= n
  return set(range(flat, flat + block))


def _reaching(plan, nodes, targets: set) -> dict:
  """For every node, the targets it depends on (itself included)."""
  reach: dict = {}
  for i in plan.order:
    got = frozenset({i}) if i in targets else frozenset()
    for j in nodes[i].src: got |= reach.get(j, frozenset())
    reach[i] = got
  return reach


# ------------------------------------------------------------------ accumulations
class Link:
  """One step of an accumulation: node = OP(acc operand, contribution). `srcs` are the
  contribution's sources and `fn` makes it from their values (None: the one source as it is);
  `also` are nodes of the step besides `node` (WHERE's CMPLT)."""
  __slots__ = ("node", "acc", "srcs", "fn", "also")

  def __init__(self, node, acc, srcs, fn=None, also=()):
    self.node, self.acc, self.srcs, self.fn, self.also = node, acc, srcs, fn, also


class Accumulation:
  """STORE(T, links[-1].node) carried through the loops `ranges` (outer first): the reduce
  `op` over the links' contributions, point after point, starting from `read`'s value.
  acc_first: the accumulator is the first operand of every step (MAX is not symmetric)."""
  __slots__ = ("ranges", "op", "read", "links", "acc_first")

  def __init__(self, ranges, op, read, links, acc_first):
    self.ranges, self.op, self.read, self.links, self.acc_first = ranges, op, read, links, acc_first

  @property
  def update(self): return self.links[-1].node

  @property
  def deferred(self) -> set:
    return {x for link in self.links for x in (link.node, *link.also)}


def step_forms(plan, nodes, v):
  """Every way node v is one accumulation step: (Link, reduce op, acc first)."""
  n = nodes[v]
  u = UNITS.get(n.op)
  if u is not None and u.accumulates is not None:
    slot, op, fn = u.accumulates
    for k in ([slot] if slot is not None else range(len(n.src))):
      yield Link(v, n.src[k], [j for kk, j in enumerate(n.src) if kk != k], fn), op, k == 0
  if n.op == "WHERE" and nodes[n.src[0]].op == "CMPLT" and plan.data_uses[n.src[0]] == [(v, 0)]:
    a, b = nodes[n.src[0]].src
    if n.src[1:] == (b, a):   # WHERE(a < b, b, a) = MAX(a, b) (decision max-nan)
      yield Link(v, a, [b], None, (n.src[0],)), "MAX", True
      yield Link(v, b, [a], None, (n.src[0],)), "MAX", False


def _only_used_by(plan, x, link) -> bool:
  """x is used by the step `link` alone (by its node, and by its CMPLT for WHERE)."""
  users = {link.node, *link.also}
  return bool(plan.data_uses[x]) and all(c in users for c, _ in plan.data_uses[x])


def _carried_read(plan, nodes, x, carried_afters):
  """The chain node that x reads the carried storage through (x itself, or the source of a
  plain LOAD of it), or None."""
  if role(nodes[x].op) == "gated_load" and len(nodes[x].src) == 1: x = nodes[x].src[0]
  if x not in plan.root or not any(link in carried_afters for link in [x] + plan.chain_links(x)): return None
  return x


def match_store(plan, nodes, s, ranges, carried_afters):
  """The Accumulation STORE s is, or None."""
  st = nodes[s]
  if st.op != "STORE": return None
  bit = bits(plan.axis_of, ranges)
  sig = _index_signature(plan, nodes, st.src[0])
  if any(plan.axes[j] & bit for part in sig for key in part if isinstance(key, tuple) and key[0] == "n" for j in [key[1]]): return None
  v, users = st.src[1], [(s, 1)]
  links, op, acc_first = [], None, None
  while True:
    if plan.data_uses[v] != users: return None
    for link, o, first in step_forms(plan, nodes, v):
      if (op is None or (o == op and (o != "MAX" or first == acc_first))) and not any(_reaches(plan, nodes, j, carried_afters, bit) for j in link.srcs):
        break
    else: return None
    links.append(link); op, acc_first = o, first
    rd = _carried_read(plan, nodes, link.acc, carried_afters)
    if rd is not None:
      ok = (storage_id(nodes, plan.root[rd]) == storage_id(nodes, plan.root[st.src[0]]) and _index_signature(plan, nodes, rd) == sig
            and _only_used_by(plan, link.acc, link))
      return Accumulation(ranges, op, link.acc, links[::-1], acc_first) if ok else None
    if not _only_used_by(plan, link.acc, link): return None
    v, users = link.acc, sorted(plan.data_uses[link.acc])


def accumulations(plan, nodes, ranges, afters, stores):
  """{STORE: Accumulation} for the stores into the storage the AFTERs carry through `ranges`,
  or None when one of them is not an accumulation (or the storage is read otherwise)."""
  bit = bits(plan.axis_of, ranges)
  carried_afters = set(afters)
  sids = {storage_id(nodes, plan.root[a]) for a in afters}
  specs, places = {}, {}
  for s in (s for sid in sids for s in stores.get(sid, ()) if plan.axes[s] & bit):
    spec = match_store(plan, nodes, s, ranges, carried_afters)
    if spec is None: return None
    specs[s] = spec
    places.setdefault(storage_id(nodes, plan.root[nodes[s].src[0]]), []).append(_index_signature(plan, nodes, nodes[s].src[0]))
  for sigs in places.values():   # several accumulators in one buffer: at distinct constant places
    if len(sigs) > 1 and (len(set(sigs)) != len(sigs) or any(k[0] == "n" for sig in sigs for part in sig for k in part if isinstance(k, tuple))):
      return None
  # the carried storage is read by the accumulations alone: every use of a carried AFTER leads
  # (through chain links) to an accumulation's read or to a target of its STOREs
  reads = {spec.read for spec in specs.values()}
  stack = list(carried_afters)
  while stack:
    x = stack.pop()
    if x in reads: continue   # used by its accumulation alone (match_store)
    for c, k in plan.data_uses[x]:
      if c in reads or (k == 0 and c in specs): continue
      if k == 0 and c in plan.root and role(nodes[c].op) == "through":
        stack.append(c)
        continue
      return None
  return specs


def _index_signature(plan, nodes, i):
  """The index sources along a storage chain, as comparable keys."""
  sig = []
  for link in plan.chain_links(i):
    n = nodes[link]
    if role(n.op) == "through" and len(n.src) > 1:
      sig.append(tuple(_const_key(plan, nodes, j) for j in n.src[1:]))
    elif role(n.op) == "view": sig.append(("view", n.arg["offset"], n.arg["size"], n.arg["dtype"]))
  return tuple(sig)


def _const_key(plan, nodes, j):
  n = nodes[j]
  if constant(plan, j) is not None: return ("c", constant(plan, j))
  if n.op == "VCONST": return ("v", repr(list(n.arg["values"])), n.arg["dtype"])
  return ("n", j)


def _reaches(plan, nodes, j, targets, bit) -> bool:
  """Does j depend on one of targets, looking only inside the loop (nodes that vary with it)?"""
  stack, seen = [j], set()
  while stack:
    x = stack.pop()
    if x in targets: return True
    if x in seen or not plan.axes.get(x, 0) & bit: continue
    seen.add(x)
    stack.extend(nodes[x].src)
  return False


# ------------------------------------------------------------------ stepped loops
class Stepped:
  """The carried loops `ranges` (outer first) closed by one END, whose `body` (the nodes that
  depend on a `carried` AFTER, and the STOREs into storage they store into) runs one point
  at a time; `nested` are the nodes of stepped loops inside it (run by their END) and
  `frontier` the loop's other nodes those read (computed for all points before the loop)."""
  __slots__ = ("ranges", "body", "carried", "nested", "frontier")

  def __init__(self, ranges, body, carried):
    self.ranges, self.body, self.carried, self.nested, self.frontier = ranges, body, carried, set(), []


def find_stepped(plan, nodes, ranges):
  by_end: dict[int, list] = {}
  for r in ranges:
    ends = [i for i in plan.order if role(nodes[i].op) == "close" and r in nodes[i].src[1:]]
    if len(ends) != 1:
      raise EvalError(f"RANGE node {r} carries a dependency through storage but is closed by {len(ends)} ENDs (one is needed)", r, "RANGE", rule="eval.unsupported")
    by_end.setdefault(ends[0], []).append(r)
  loops = {}
  for e, rs in by_end.items():
    rs.sort(key=plan.axis_of.get)
    mask = bits(plan.axis_of, rs)
    loop = [i for i in plan.order if plan.axes.get(i, 0) & mask and i < e]
    late = [i for i in plan.order if plan.axes.get(i, 0) & mask and i > e]
    if late:
      raise EvalError(f"node {late[0]} still depends on a RANGE closed by END node {e} after it", late[0], nodes[late[0]].op, rule="eval.unsupported")
    carried = [a for a in loop if role(nodes[a].op) == "after" and any(r in listed_ranges(nodes, a) for r in rs)]
    plan.sequential[e] = Stepped(tuple(rs), _stepped_nodes(plan, nodes, loop, carried), carried)
    loops[e] = loop
  for e, spec in plan.sequential.items():   # the stepped loops inside each one, at any depth
    stack = [x for x in plan.sequential if x != e and x in spec.body]
    while stack:
      new = set(plan.sequential[stack.pop()].body) - spec.nested
      spec.nested |= new
      stack.extend(x for x in plan.sequential if x != e and x in new)
  for e, spec in plan.sequential.items():
    run, loop = set(spec.body) | spec.nested, set(loops[e])
    spec.body = [i for i in spec.body if i not in spec.nested]
    spec.frontier = sorted({j for i in run for j in nodes[i].src if j in loop and j not in run and j not in spec.ranges})
    plan.in_loop.update(spec.body)
  # a stepped loop's AFTER reads one state for all points of the stepped loops it lists (a
  # register set at each of them is one register), whether or not it carries them
  stepped = {r for spec in plan.sequential.values() for r in spec.ranges}
  for spec in plan.sequential.values():
    for a in spec.carried:
      plan.carried_bits[a] = plan.carried_bits.get(a, 0) | bits(plan.axis_of, [r for r in listed_ranges(nodes, a) if r in stepped])


def _stepped_nodes(plan, nodes, loop, carried) -> list:
  """The nodes of a loop that must run one point at a time: those that depend on a carried
  AFTER, and the STOREs (with what depends on them) into any storage those store into."""
  stepped = set(carried)
  while True:
    for i in loop:
      if i not in stepped and any(j in stepped for j in nodes[i].src): stepped.add(i)
    written = {storage_id(nodes, plan.root[nodes[i].src[0]]) for i in stepped if role(nodes[i].op) == "store" and nodes[i].src[0] in plan.root}
    more = {i for i in loop if i not in stepped and role(nodes[i].op) == "store" and nodes[i].src[0] in plan.root
            and storage_id(nodes, plan.root[nodes[i].src[0]]) in written}
    if not more: return [i for i in loop if i in stepped]
    stepped |= more
