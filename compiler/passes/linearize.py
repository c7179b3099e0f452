"""Stage 6, linearize: a kernel's graph becomes one instruction list, LINEAR(...).

Loops become blocks. First every END over several ranges is split into nested ENDs of
one range each. Each RANGE r is closed by exactly one END, and the ranges open at that
END are the loops r is nested in; so the loops form a tree. A node belongs to the block
of the innermost loop among the ranges it depends on (loop-invariant code is hoisted by
construction: a value that does not depend on a range is computed outside its loop).
Each block is listed in dependency order (Kahn's algorithm, ties broken by the original
topological order), a nested loop being one item: RANGE, its block, END. A STORE with a
gate is wrapped in IF(gate) ... ENDIF.
A RANGE closed by no END (or by two), or a node that depends on ranges of two sibling
loops, is refused (compile.form).
"""
from __future__ import annotations
import heapq
from tinyspec.uop import UOp, toposort
from tinyspec.compiler.errors import CompileError
from tinyspec.rewrite import Pat, Rule, RuleSet
from tinyspec.compiler.passes.steps import Step


def split_end(x: UOp):
  """END(body, r0, r1, ...) -> END(END(body, r1...), r0): one range per END (bottom-up, so
  an END inside another's body is split too)."""
  if len(x.src) <= 2: return None
  body = x.src[0]
  for r in reversed(x.src[1:]): body = UOp("END", (body, r))
  return body


SPLIT_ENDS = Step("split_ends", RuleSet([Rule("split_end", Pat("END", name="x"), split_end)], "split_ends"), once=True)


def split_ends(sink: UOp) -> UOp: return SPLIT_ENDS(sink)


def linearize(sink: UOp) -> UOp:
  return UOp("LINEAR", tuple(_Loops(split_ends(sink)).emit(None)))


class _Loops:
  """A kernel's loop tree (parent[r]: the loop r runs inside, None the top level) and the
  block every node belongs to."""

  def __init__(self, sink: UOp):
    nodes = self.nodes = toposort(sink)
    self.order = {u: i for i, u in enumerate(nodes)}
    rng: dict[UOp, frozenset] = {}     # the ranges open at each node
    for u in nodes:
      s = frozenset().union(*[rng[x] for x in u.src]) if u.src else frozenset()
      if u.op == "RANGE": s = s | {u}
      elif u.op == "END": s = s - {u.src[1]}
      rng[u] = s
    self.closer: dict[UOp, UOp] = {}
    for u in nodes:
      if u.op == "END":
        if u.src[1] in self.closer: raise CompileError("compile.form", f"RANGE {u.src[1].arg['id']} is closed by two ENDs", u)
        self.closer[u.src[1]] = u
    for u in nodes:
      if u.op == "RANGE" and u not in self.closer: raise CompileError("compile.form", f"RANGE {u.arg['id']} is closed by no END", u)
    self.parent: dict[UOp, UOp | None] = {}
    self.depth: dict[UOp | None, int] = {None: 0}
    self.chain: dict[UOp | None, frozenset] = {None: frozenset()}
    for e in reversed([u for u in nodes if u.op == "END"]):
      r = e.src[1]
      p = self.innermost(rng[e], e)
      self.parent[r], self.depth[r], self.chain[r] = p, self.depth[p] + 1, self.chain[p] | {r}
    self.block: dict[UOp, UOp | None] = {}
    for u in nodes:
      if u.op == "RANGE": self.block[u] = self.parent[u]
      elif u.op == "END": self.block[u] = self.parent[u.src[1]]
      else: self.block[u] = self.innermost(rng[u], u)
    self.members: dict = {}
    for u in nodes: self.members.setdefault(self.block[u], []).append(u)
    self.inside: dict = {}      # loop range -> every node in it (nested loops included)
    for u in nodes:
      x = self._loop_of(u)
      while x is not None:
        self.inside.setdefault(x, []).append(u); x = self.parent[x]

  def innermost(self, s: frozenset, who: UOp):
    if not s: return None
    if any(r not in self.depth for r in s): raise CompileError("compile.form", f"{who.op} uses a range outside its loop", who)
    m = max(s, key=lambda r: self.depth[r])
    if not s <= self.chain[m]: raise CompileError("compile.form", f"{who.op} depends on ranges of two sibling loops", who)
    return m

  def _loop_of(self, u: UOp):
    return u.src[1] if u.op == "END" else u if u.op == "RANGE" else self.block[u]

  def item_at(self, u: UOp, b):
    """The item of block b that holds u: u itself, or the child loop of b containing it."""
    x = self._loop_of(u)
    if u.op not in ("RANGE", "END") and x is b: return u
    while x is not None and self.parent[x] is not b: x = self.parent[x]
    return ("loop", x) if x is not None else None

  def items(self, b) -> tuple[list, dict, dict]:
    """Block b's items (its nodes, and ("loop", r) per child loop), each one's sort key
    (its position in the original order) and the items it depends on."""
    items = [u for u in self.members.get(b, []) if u.op not in ("RANGE", "END")]
    items += [("loop", r) for r in self.parent if self.parent[r] is b]
    key, deps = {}, {}
    for it in items:
      contents = self.inside[it[1]] if isinstance(it, tuple) else [it]
      key[it] = self.order[self.closer[it[1]]] if isinstance(it, tuple) else self.order[it]
      d = set()
      for u in contents:
        for s in u.src:
          j = self.item_at(s, b)
          if j is not None and j != it: d.add(j)
      deps[it] = d
    return items, key, deps

  def emit(self, b) -> list[UOp]:
    """Block b in dependency order (Kahn's algorithm, ties by the original order)."""
    items, key, deps = self.items(b)
    users: dict = {it: [] for it in items}
    for it, d in deps.items():
      for j in d: users[j].append(it)
    indeg = {it: len(d) for it, d in deps.items()}
    heap = [(key[it], n, it) for n, it in enumerate(items) if indeg[it] == 0]
    seq = {it: n for n, it in enumerate(items)}
    heapq.heapify(heap)
    out: list[UOp] = []
    done = 0
    while heap:
      _, _, it = heapq.heappop(heap)
      done += 1
      if isinstance(it, tuple):
        r = it[1]
        out += [r, *self.emit(r), self.closer[r]]
      elif it.op == "STORE" and len(it.src) == 3:
        iff = UOp("IF", (it.src[2], it.src[0], it.src[1]))
        out += [iff, it, UOp("ENDIF", (iff,))]
      else:
        out.append(it)
      for j in users[it]:
        indeg[j] -= 1
        if indeg[j] == 0: heapq.heappush(heap, (key[j], seq[j], j))
    if done != len(items): raise CompileError("compile.form", "the kernel's loops depend on each other in a cycle")
    return out
