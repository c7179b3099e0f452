"""A picture of a graph, before layout: the boxes (a node, a collapsed chain, or the
'… N more nodes' box), the clusters around kernel and function bodies and instruction
listings, and the edges between boxes, each with its source positions.

    pic = picture(graph)                      # validates the graph itself
    pic = picture(graph, result=res, highlight={17: "first divergent node"})
    pic.items, pic.clusters, pic.edges, pic.notes, pic.exit_code
"""
from __future__ import annotations
from collections import Counter
from dataclasses import dataclass, field
from tinyspec.tables import tables
from tinyspec.show import structure, labels
from tinyspec.show.structure import TOP
from tinyspec.validate import validate

DEFAULT_LIMIT = 1000        # boxes drawn before the rest is summed up in one '… more' box
COLLAPSE_ABOVE = 300        # --collapse auto: collapse chains in graphs with more nodes than this
MIN_CHAIN = 4               # a chain of fewer nodes stays expanded
SPREAD_ABOVE = 6            # a leaf with more users is drawn beside each of them
MAX_NOTES = 20              # graph-level lines (errors without a node ...) listed on the picture


@dataclass
class Item:
  """One box. `nodes`: the graph nodes it stands for (none for the '… more' box)."""
  id: str
  nodes: list[int]
  scope: int
  lines: list[str]
  tip: str
  kind: str = "node"           # node | chain | more
  category: str = "unknown"    # the op category (colours the box)
  invalid: bool = False
  highlight: bool = False
  new: bool = False            # (stages) not in the previous stage
  last: bool = False           # (listing owners) drawn below everything else of its cluster
  root: bool = False           # a root of the graph


@dataclass
class Edge:
  src: int                     # item indices
  dst: int
  positions: tuple             # the source positions of dst this edge fills (src[k])
  tip: str = ""
  kind: str = "data"           # data | more


@dataclass
class Box:
  """A cluster as drawn: its title and hover text, its enclosing cluster (or TOP)."""
  id: str
  parent: int
  title: str
  tip: str
  kind: str


@dataclass
class Picture:
  title: str
  items: list[Item]
  edges: list[Edge]
  clusters: list[Box]
  notes: list[str] = field(default_factory=list)   # graph-level lines: errors without a node, what was left out
  nodes: int = 0               # nodes in the graph
  hidden: int = 0              # nodes not drawn (the '… more' box counts them)
  collapsed: int = 0           # nodes folded into chain boxes
  exit_code: int = 0           # 0 valid, 1 invalid (as `tinyspec validate`)
  level: str | None = None


def picture(graph, *, result=None, level: str = "auto", limit: int = DEFAULT_LIMIT, collapse: str = "auto",
            focus: int | None = None, highlight: dict | None = None, title: str = "", file: str = "<graph>") -> Picture:
  """The picture of `graph` (a tinyspec Graph).

  result     its ValidationResult, if the caller has one (else the graph is validated at `level`)
  limit      at most this many boxes (0: no limit); the rest is one '… N more nodes' box
  collapse   'auto' (chains collapse in graphs over COLLAPSE_ABOVE nodes), 'on' or 'off'
  focus      a node index: show the boxes nearest it (instead of nearest the roots)
  highlight  {node index: note}: drawn marked, with the note in the hover text, never hidden
  """
  if collapse not in ("auto", "on", "off"): raise ValueError(f"collapse must be auto, on or off, not {collapse!r}")
  if result is None:
    result = validate(graph, level, file=file)
  ops, nodes = tables().ops, graph.nodes
  n = len(nodes)
  views = result.views if result.views and len(result.views) == n else [None] * n
  highlight = {int(k): str(v) for k, v in (highlight or {}).items() if 0 <= int(k) < n}
  diags_at, notes = _diagnostics(result.diagnostics, n)
  roots = [r for r in graph.root_indices if 0 <= r < n]
  rootset = set(roots)
  inst, clusters, listed = structure.scopes(nodes, roots, ops)

  keep = set(roots) | set(diags_at) | set(highlight) | ({focus} if focus is not None else set())
  do_collapse = collapse == "on" or (collapse == "auto" and n > COLLAPSE_ABOVE)
  runs = structure.chains(nodes, ops, inst, keep, MIN_CHAIN) if do_collapse else []
  groups = _Groups(nodes, inst, runs, clusters, _spread(nodes, ops, keep))
  shown = _select(nodes, ops, groups, inst, roots, diags_at, highlight, focus, limit)

  items, index_of = [], {}
  for g, (members, sc, suffix) in enumerate(groups.groups):
    if not shown[g]: continue
    index_of[g] = len(items)
    items.append(_item(members, sc, suffix, nodes, views, ops, clusters, listed, diags_at, highlight))
    items[-1].root = members[-1] in rootset
  hidden_groups = [m for g, (m, _, _) in enumerate(groups.groups) if not shown[g]]
  hidden = len({j for m in hidden_groups for j in m} - {j for it in items for j in it.nodes})
  edges = _edges(nodes, ops, groups, index_of, items, hidden)
  boxes, remap = _boxes(clusters, items, nodes)
  for it in items: it.scope = remap.get(it.scope, TOP)
  if hidden: notes.append(_hidden_note(nodes, hidden_groups, hidden))
  collapsed = sum(len(it.nodes) for it in items if it.kind == "chain")
  return Picture(title or file, items, edges, boxes, notes, n, hidden, collapsed, result.exit_code, result.level)


def _diagnostics(diagnostics, n) -> tuple[dict, list]:
  """({node: its diagnostics}, lines for the errors that name no node)."""
  at: dict[int, list] = {}
  notes = []
  for d in diagnostics:
    if d.node is not None and 0 <= d.node < n: at.setdefault(d.node, []).append(d)
    else: notes.append(f"error [{labels.clean(d.rule)}]: {labels.clean(d.message)}")
  if len(notes) > MAX_NOTES: notes = notes[:MAX_NOTES] + [f"error: … and {len(notes) - MAX_NOTES} more errors without a node"]
  return at, notes


def _select(nodes, ops, groups, inst, roots, diags_at, highlight, focus, limit) -> list[bool]:
  """Which boxes to draw: the `limit` nearest a focus node, or else nearest the
  highlighted nodes, the nodes with errors and the roots (then nodes nothing uses)."""
  up, down = _adjacency(nodes, ops, groups, inst)
  first = groups.first
  if focus is not None and 0 <= focus < len(nodes):
    seeds, both = [first[focus]] + [first[j] for j in sorted(highlight)], True
  else:
    seeds, both = [first[j] for j in (*sorted(highlight), *sorted(diags_at)[:50], *reversed(roots))], False
  unused = [g for g in range(len(groups.groups) - 1, -1, -1) if not down[g]]
  return structure.select(len(groups.groups), up, down, seeds, limit, both, unused)


def _hidden_note(nodes, hidden_groups, hidden: int) -> str:
  counts = Counter(nodes[j].op for m in hidden_groups for j in m)
  top = ", ".join(f"{op} {c:,}" for op, c in counts.most_common(6))
  return f"… {hidden:,} more nodes not shown ({top}); raise --limit or pick --focus NODE"


class _Groups:
  """The boxes before selection: a collapsed chain, or one drawing of one node in one
  scope (a node shared between clusters is drawn in each; a leaf with more than
  SPREAD_ABOVE users, like a shape constant, is drawn beside each user instead of
  sending edges across the picture). Each group is (nodes, scope, id suffix).
  `of(j, s, g)`: the box that shows node j to box g drawn in scope s."""
  def __init__(self, nodes, inst, runs, clusters, spread: set):
    self.inst, self.clusters, self.spread = inst, clusters, spread
    self.groups: list[tuple[list[int], int, str]] = []
    self.first = [-1] * len(nodes)           # a node's first box
    self.copies: dict[tuple, int] = {}       # (node, scope) -> box, for nodes drawn in several scopes
    self.beside: dict[tuple, int] = {}       # (spread node, user box) -> its copy there
    for run in runs:
      for j in run: self.first[j] = len(self.groups)
      self.groups.append((run, inst[run[0]][0], ""))
    for i in range(len(nodes)):
      if self.first[i] >= 0 or i in spread: continue
      self.first[i] = len(self.groups)
      if len(inst[i]) > 1:
        for s in inst[i]:
          self.copies[(i, s)] = len(self.groups)
          self.groups.append(([i], s, f"-k{clusters[s].owner}" if s != TOP else ""))
      else: self.groups.append(([i], inst[i][0], ""))
    for g in range(len(self.groups)):
      members, sc, suffix = self.groups[g]
      for c in members:
        for j in nodes[c].src:
          if j in spread and (j, g) not in self.beside and 0 <= j < c:
            self.beside[(j, g)] = len(self.groups)
            if self.first[j] < 0: self.first[j] = len(self.groups)
            self.groups.append(([j], sc, f"-u{members[0]}{suffix}"))
    for j in spread:
      if self.first[j] < 0: self.first[j] = len(self.groups); self.groups.append(([j], inst[j][0], ""))

  def of(self, j: int, s: int, g: int) -> int:
    if j in self.spread: return self.beside.get((j, g), self.first[j])
    if len(self.inst[j]) == 1: return self.first[j]
    while True:
      hit = self.copies.get((j, s))
      if hit is not None or s == TOP: return hit if hit is not None else self.first[j]
      s = self.clusters[s].parent


def _spread(nodes, ops, keep) -> set:
  """Leaves (no sources) with more than SPREAD_ABOVE users: drawn beside each user."""
  uses = [0] * len(nodes)
  for c in range(len(nodes)):
    for _, j in _source_uses(nodes, ops, c): uses[j] += 1
  return {j for j, u in enumerate(uses) if u > SPREAD_ABOVE and not nodes[j].src and j not in keep}


def _source_uses(nodes, ops, c):
  """(position, source) of node c's drawn sources (not a listing's: its box shows them)."""
  node = nodes[c]
  kinds = structure.slot_kinds(node, ops.get(node.op))
  for k, j in enumerate(node.src):
    if 0 <= j < c and (kinds is None or kinds[k] != "listing"): yield k, j


def _adjacency(nodes, ops, groups: _Groups, inst) -> tuple[list, list]:
  """(box -> its source boxes in source order, a listing's instructions from the last
  back (not drawn as edges, but near); box -> the boxes that use it)."""
  up: list[list[int]] = [[] for _ in groups.groups]
  down: list[list[int]] = [[] for _ in groups.groups]
  for g, (members, sc, _) in enumerate(groups.groups):
    for c in members:
      for _, j in _source_uses(nodes, ops, c):
        a = groups.of(j, sc, g)
        if a != g: up[g].append(a); down[a].append(g)
      node = nodes[c]
      if structure.lists(ops.get(node.op)):
        for j in reversed(node.src):
          if 0 <= j < c:
            a = groups.of(j, inst[c][0], g)
            up[g].append(a); down[a].append(g)
  return up, down


def _item(members, sc, suffix, nodes, views, ops, clusters, listed, diags_at, highlight) -> Item:
  first = members[0]
  if len(members) > 1:
    od = ops.get(nodes[members[-1]].op)
    return Item(f"c{first}", list(members), sc, labels.chain_lines(members, nodes, views),
                labels.chain_tip(members, nodes, views), kind="chain", category=od.category if od else "unknown")
  i = first
  node, od = nodes[i], ops.get(nodes[first].op)
  owner = clusters[sc].owner if sc != TOP and clusters[sc].kind == "listing" else None
  pos = listed[i].get(owner) if listed[i] and owner is not None else None
  shown = min(len(node.src), labels.TIP_SOURCES)
  slot_names = [od.slot_for(k).name for k in range(shown)] if od is not None and od.slots else [""] * shown
  diags = diags_at.get(i, [])
  it = Item(f"n{i}{suffix}", [i], sc, labels.node_lines(i, node, views[i], pos, diags),
            labels.node_tip(i, node, views[i], diags, slot_names, listed[i], highlight.get(i)),
            category=od.category if od is not None else "unknown", invalid=bool(diags), highlight=i in highlight)
  it.last = structure.lists(od)
  return it


def _edges(nodes, ops, groups: _Groups, index_of, items, hidden) -> list[Edge]:
  """One edge per (source box, consumer box) pair with the positions it fills; a box whose
  sources are not all drawn gets a dashed edge from the '… more' box."""
  found: dict[tuple, list] = {}
  cut: dict[int, list] = {}
  group_of = {b: g for g, b in index_of.items()}
  for b_idx, it in enumerate(items):
    for c in it.nodes:
      for k, j in _source_uses(nodes, ops, c):
        g = groups.of(j, it.scope, group_of[b_idx])
        if g in index_of and index_of[g] == b_idx: continue
        if g not in index_of: cut.setdefault(b_idx, []).append((c, k, j)); continue
        found.setdefault((index_of[g], b_idx), []).append((c, k, j))
  edges = []
  for (a, b), uses in found.items():
    positions = tuple(k for _, k, _ in uses) if items[b].kind == "node" else ()
    tip = "\n".join(f"node {j} → src[{k}] of node {c}" for c, k, j in uses[:20])
    edges.append(Edge(a, b, positions, tip))
  if cut:
    more = len(items)
    items.append(Item("more", [], TOP, [f"… {hidden:,} more nodes", "not shown (--limit)"],
                      f"{hidden:,} nodes are not drawn; each dashed edge ends at a box with a source among them", kind="more", category="more"))
    for b, uses in sorted(cut.items()):
      tip = "\n".join(f"node {j} (not shown) → src[{k}] of node {c}" for c, k, j in uses[:20])
      edges.append(Edge(more, b, (), tip, kind="more"))
  edges.sort(key=lambda e: (e.dst, e.positions, e.src))
  return edges


def _boxes(clusters, items, nodes) -> tuple[list[Box], dict]:
  """The clusters that hold a drawn box (and the clusters around them), renumbered."""
  used = set()
  for it in items:
    s = it.scope
    while s != TOP and s not in used: used.add(s); s = clusters[s].parent
  order = sorted(used)
  remap = {c: k for k, c in enumerate(order)}
  boxes = []
  for c in order:
    cl = clusters[c]
    owner = nodes[cl.owner]
    if cl.kind == "listing":
      title = f"{owner.op} {cl.owner}: {len(owner.src)} instructions"
      tip = f"the instructions node {cl.owner} ({owner.op}) lists, numbered #k in list order"
    else:
      name = owner.arg.get("name") if isinstance(owner.arg, dict) else None
      who = [f"{nodes[o].op} {o}" for o in (cl.openers or [])[:3]] + ([f"{len(cl.openers) - 3} more"] if len(cl.openers or ()) > 3 else [])
      title = f"body of {', '.join(who)}: {owner.op} {cl.owner}" + (f" ({labels.clean(str(name))})" if name else "")
      tip = f"the nodes only the body rooted at node {cl.owner} ({owner.op}) uses"
    boxes.append(Box(f"k{cl.owner}", remap.get(cl.parent, TOP), labels.clean(title), labels.clean(tip), cl.kind))
  return boxes, remap
