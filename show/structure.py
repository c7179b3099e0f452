"""What a picture groups and leaves out, worked out on the graph alone (linear passes, no
layout): the clusters nodes belong to, the chains that collapse into one box, and which
boxes are shown when the graph is over the node limit.

Clusters come from the op table's slots, not from op names:
  * a `kind: body` slot (FUNCTION's and CALL's body: a TUPLE, a kernel SINK, a PROGRAM)
    makes the nodes only that body uses a cluster;
  * a variadic slot with a `level` (LINEAR's instruction list) makes its sources a
    listing: a cluster around them, numbered in list order, instead of one edge per
    instruction.
A node used in several clusters is drawn in each (bodies are closed: a constant two
kernels share is each kernel's own), within a budget of copies.
"""
from __future__ import annotations
from collections import deque
from dataclasses import dataclass

TOP = -1                  # the scope of nodes in no cluster
_UNSET = -2
MAX_DEPTH = 32            # clusters nested deeper are drawn flat (keeps the scope pass linear)
COPY_BUDGET = 20_000      # extra copies of nodes shared between clusters (at least one per node allowed)
HUB = 16                  # (focus) users of one item beyond which the selection does not walk down from it
CHAIN_CATEGORIES = ("elementwise", "decomposed", "movement", "marker")   # op categories whose runs collapse


@dataclass
class Cluster:
  kind: str               # "body" (a function/kernel body) or "listing" (LINEAR's instructions)
  owner: int              # the body's root node, or the listing's LINEAR node
  parent: int             # enclosing cluster index, or TOP
  depth: int              # 1 for a cluster at the top
  openers: list = None    # (body) the nodes that take it as their body, in file order


_SPECS: dict[int, tuple] = {}   # id(op) -> (op, (kinds of the fixed slots, kind of the variadic tail) or None)


def _spec(od):
  hit = _SPECS.get(id(od))
  if hit is not None and hit[0] is od: return hit[1]
  def kind(s): return "body" if s.kind == "body" else "listing" if s.variadic and s.level is not None else "plain"
  fixed = tuple(kind(s) for s in od.slots if not s.variadic)
  tail = kind(od.slots[-1]) if od.slots and od.slots[-1].variadic else "plain"
  spec = None if all(k == "plain" for k in (*fixed, tail)) else (fixed, tail)
  _SPECS[id(od)] = (od, spec)
  return spec


def slot_kinds(node, od) -> tuple | None:
  """Per source position of a node: 'body', 'listing' or 'plain' (from its op's slots);
  None when every source is plain (most ops)."""
  if od is None or not od.slots: return None
  spec = _spec(od)
  if spec is None: return None
  fixed, tail = spec
  n = len(node.src)
  return fixed[:n] if n <= len(fixed) else fixed + (tail,) * (n - len(fixed))


def lists(od) -> bool:
  """Whether the op's sources are a listing (LINEAR's instructions)."""
  spec = _spec(od) if od is not None and od.slots else None
  return spec is not None and spec[1] == "listing"


def scopes(nodes, roots, ops) -> tuple[list[tuple], list[Cluster], list[dict]]:
  """(the scopes each node is drawn in: a tuple of cluster indices or TOP, the clusters,
  each node's listing positions {LINEAR node: position}). One reverse pass: every
  consumer is seen before its sources.

  A node used in several scopes is drawn in each (a constant two kernels share appears in
  both, as bodies are closed), up to COPY_BUDGET extra copies in all; past that, it is
  drawn once in the innermost cluster holding every use."""
  n = len(nodes)
  plain = [_UNSET] * n     # the scopes a node is used in as a plain source: _UNSET, one scope, or a set
  opened = [_UNSET] * n    # the innermost scope holding every use of it as a body
  inst: list[tuple] = [(TOP,)] * n
  clusters: list[Cluster] = []
  listed: list = [None] * n
  openers: dict[int, list] = {}
  budget = [max(COPY_BUDGET, n)]
  for r in roots:
    if 0 <= r < n: plain[r] = TOP

  def lca(a, b):
    if a == _UNSET: return b
    if b == _UNSET or a == b: return a
    while a != b:
      da = clusters[a].depth if a != TOP else 0
      db = clusters[b].depth if b != TOP else 0
      if da >= db: a = clusters[a].parent
      if db >= da: b = clusters[b].parent
    return a

  def new(kind, owner, parent):
    depth = (clusters[parent].depth if parent != TOP else 0) + 1
    if depth > MAX_DEPTH: return parent
    clusters.append(Cluster(kind, owner, parent, depth))
    return len(clusters) - 1

  def use(j, s):
    p = plain[j]
    if p == _UNSET: plain[j] = s
    elif type(p) is int:
      if p != s: plain[j] = {p, s}
    else: p.add(s)

  for i in range(n - 1, -1, -1):
    node = nodes[i]
    p, o = plain[i], opened[i]
    if p == _UNSET and o != _UNSET:                          # used only as a body: its own cluster
      here = (new("body", i, o),)
      if here[0] != o: clusters[here[0]].openers = openers.pop(i)[::-1]
    elif p == _UNSET: here = (TOP,)                          # unused (not a root): drawn at the top
    else:
      where = {p} if type(p) is int else p
      if o != _UNSET: where = where | {o}
      if len(where) > 1 and budget[0] >= len(where) - 1:
        budget[0] -= len(where) - 1
        here = tuple(sorted(where))
      else:
        a = _UNSET
        for s in where: a = lca(a, s)
        here = (a,)
    od = ops.get(node.op)
    kinds = slot_kinds(node, od)
    if lists(od):
      a = _UNSET
      for s in here: a = lca(a, s)
      here = (new("listing", i, a),)
    inst[i] = here
    for k, j in enumerate(node.src):
      if not 0 <= j < i: continue
      kind = kinds[k] if kinds is not None else "plain"
      if kind == "body":
        for s in here: opened[j] = lca(opened[j], s)
        openers.setdefault(j, []).append(i)
        continue
      for s in here: use(j, s)
      if kind == "listing":
        if listed[j] is None: listed[j] = {}
        listed[j].setdefault(i, k)
  return inst, clusters, listed


def chains(nodes, ops, inst, keep: set, min_len: int) -> list[list[int]]:
  """Runs of at least min_len nodes, each used once and only by the next, all of an op
  category in CHAIN_CATEGORIES and drawn once, in one scope (each run is one box).
  Nodes in `keep` (roots, nodes with errors, highlighted nodes) are never collapsed."""
  n = len(nodes)
  uses, user = [0] * n, [-1] * n
  for i, node in enumerate(nodes):
    kinds = slot_kinds(node, ops.get(node.op))
    for k, j in enumerate(node.src):
      if 0 <= j < i and (kinds is None or kinds[k] != "listing"):
        uses[j] += 1; user[j] = i
  ok = [False] * n
  for i, node in enumerate(nodes):
    od = ops.get(node.op)
    ok[i] = od is not None and od.category in CHAIN_CATEGORIES and i not in keep and len(inst[i]) == 1
  nxt, has_prev = [-1] * n, [False] * n
  for c, node in enumerate(nodes):
    if not ok[c]: continue
    for j in node.src:   # the first source in source order that may link (a chain stays a path)
      if 0 <= j < c and user[j] == c and uses[j] == 1 and ok[j] and inst[j] == inst[c]:
        nxt[j], has_prev[c] = c, True
        break
  out = []
  for j in range(n):
    if nxt[j] < 0 or has_prev[j]: continue
    run = [j]
    while nxt[run[-1]] >= 0: run.append(nxt[run[-1]])
    if len(run) >= min_len: out.append(run)
  return out


def select(n_items: int, up: list, down: list, seeds: list[int], limit: int, both_ways: bool = False,
           more_seeds: list[int] = ()) -> list[bool]:
  """Which items to show: all when they fit the limit, else the `limit` items nearest the
  seeds, breadth first toward their sources (what the seeds are computed from); then,
  while there is room, the same from each of `more_seeds` in turn. With both_ways (a
  focus node) also toward users, except from an item with more than HUB users (a shared
  constant would otherwise pull in users from all over the graph)."""
  if limit <= 0 or n_items <= limit: return [True] * n_items
  shown = [False] * n_items
  count = 0

  def grow(start):
    nonlocal count
    todo = deque()
    for s in start:
      if 0 <= s < n_items and not shown[s] and count < limit:
        shown[s] = True; count += 1; todo.append(s)
    while todo and count < limit:
      k = todo.popleft()
      near = up[k] + down[k] if both_ways and len(down[k]) <= HUB else up[k]
      for t in near:
        if not shown[t]:
          shown[t] = True; count += 1; todo.append(t)
          if count >= limit: break

  grow(seeds)
  for s in more_seeds:
    if count >= limit: break
    grow([s])
  return shown
