"""A layered (Sugiyama-style) layout of a Picture, in pure Python and deterministic.

Sources are drawn above the nodes that use them. Each cluster is laid out on its own,
inside out, and then stands as one big box in the layout of the cluster around it:

  1. layers: longest path from the sources, then every box with users is moved down to
     just above its first user (a constant sits next to where it is used);
  2. an edge over several layers gets a dummy point on each layer between (up to a
     budget; the rest are drawn straight);
  3. order within layers: barycentric sweeps down and up, keeping the order with the
     fewest crossings;
  4. x: each box is pulled toward the mean x of its neighbours, the order and the gaps
     kept exactly (isotonic regression by pool-adjacent-violators, linear per layer).
Edges are polylines through their dummy points, entering a box at a port that follows
source order (src[0] leftmost).
"""
from __future__ import annotations
from dataclasses import dataclass, field
from tinyspec.show.structure import TOP

CHAR_W, LINE_H = 6.6, 14.0      # monospace 11px
PAD_X, PAD_Y = 7.0, 5.0         # inside a box
GAP_X, GAP_Y = 18.0, 38.0       # between boxes, between layers
CL_PAD, CL_TITLE = 10.0, 22.0   # inside a cluster: the sides, the title band
DUMMY_W = 6.0
BADGE_W = 12.0                  # room for the "!" of an invalid node
SWEEPS = 6
MAX_DUMMIES = 20_000            # per picture: beyond this long edges are drawn straight


@dataclass
class Scene:
  width: float
  height: float
  items: list                   # (x, y, w, h) per Picture item
  clusters: list                # (x, y, w, h) per Picture cluster
  edges: list                   # [(x, y), ...] per Picture edge
  ports: list = field(default_factory=list)   # per edge: (x, y) where it enters its box


def item_size(it) -> tuple[float, float]:
  w = max(len(line) for line in it.lines) * CHAR_W + 2 * PAD_X + (BADGE_W if it.invalid else 0.0)
  return max(w, 36.0), len(it.lines) * LINE_H + 2 * PAD_Y


def layout(pic) -> Scene:
  items, clusters = pic.items, pic.clusters
  sizes = [item_size(it) for it in items]
  kids: dict[int, list] = {TOP: []}
  for c, b in enumerate(clusters): kids.setdefault(c, []); kids.setdefault(b.parent, []).append(("c", c))
  for k, it in enumerate(items): kids.setdefault(it.scope, []).append(("i", k))
  first = _first_nodes(items, clusters, kids)
  scope_edges = _scope_edges(pic, clusters)
  budget = [MAX_DUMMIES]
  local: dict[int, tuple] = {}          # scope -> (w, h, {unit: (x, y)}, {edge: [points]})
  for c in sorted(range(len(clusters)), key=lambda c: -_depth(clusters, c)) + [TOP]:
    units = sorted(kids.get(c, []), key=lambda u: first[u])
    dims = [sizes[u[1]] if u[0] == "i" else _cluster_size(local[u[1]], clusters[u[1]].title) for u in units]
    last = [u[0] == "i" and items[u[1]].last for u in units]
    local[c] = _layout_scope(units, dims, last, scope_edges.get(c, []), budget)
  return _place(pic, local, sizes)


def _depth(clusters, c) -> int:
  d = 0
  while c != TOP: c = clusters[c].parent; d += 1
  return d


def _first_nodes(items, clusters, kids) -> dict:
  """Each unit's sort key: its first node index (a cluster: the first of its contents)."""
  out: dict = {}
  for k, it in enumerate(items): out[("i", k)] = min(it.nodes) if it.nodes else -1
  for c in sorted(range(len(clusters)), key=lambda c: -_depth(clusters, c)):
    out[("c", c)] = min((out[u] for u in kids.get(c, [])), default=0)
  return out


def _path(clusters, s) -> list:
  p = [s]
  while s != TOP: s = clusters[s].parent; p.append(s)
  return p[::-1]       # TOP first


def _scope_edges(pic, clusters) -> dict:
  """scope -> [(unit of the source, unit of the consumer, edge index)]: an edge belongs
  to the innermost cluster holding both ends, between the boxes there that hold them."""
  out: dict = {}
  for e, edge in enumerate(pic.edges):
    pa, pb = _path(clusters, pic.items[edge.src].scope), _path(clusters, pic.items[edge.dst].scope)
    k = 0
    while k + 1 < len(pa) and k + 1 < len(pb) and pa[k + 1] == pb[k + 1]: k += 1
    lca = pa[k]
    ua = ("c", pa[k + 1]) if k + 1 < len(pa) else ("i", edge.src)
    ub = ("c", pb[k + 1]) if k + 1 < len(pb) else ("i", edge.dst)
    if ua != ub: out.setdefault(lca, []).append((ua, ub, e))
  return out


def _cluster_size(inner, title) -> tuple[float, float]:
  w, h = inner[0], inner[1]
  return max(w + 2 * CL_PAD, len(title) * CHAR_W + 2 * CL_PAD), h + CL_PAD + CL_TITLE


# ------------------------------------------------------------------ one scope
def _layout_scope(units, dims, last, edges, budget):
  """Lay out one scope's units: (width, height, {unit: (x, y)}, {edge: [(x, y)...]})."""
  n = len(units)
  if n == 0: return 0.0, 0.0, {}, {}
  index = {u: k for k, u in enumerate(units)}
  succ: list[list[int]] = [[] for _ in range(n)]
  pred: list[list[int]] = [[] for _ in range(n)]
  pairs = []
  for ua, ub, e in edges:
    a, b = index[ua], index[ub]
    pairs.append((a, b, e))
    succ[a].append(b); pred[b].append(a)
  layer = _layers(n, succ, pred, last)
  # the virtual graph: units, then dummies
  vlayer, vw = list(layer), [d[0] for d in dims]
  vpred: list[list[int]] = [list() for _ in range(n)]
  vsucc: list[list[int]] = [list() for _ in range(n)]
  chains = {}
  for a, b, e in pairs:
    if layer[b] <= layer[a]: continue            # (never for a graph's edges; kept safe)
    hops, prev = [], a
    if layer[b] - layer[a] - 1 <= budget[0]:
      budget[0] -= layer[b] - layer[a] - 1
      for lv in range(layer[a] + 1, layer[b]):
        d = len(vlayer); vlayer.append(lv); vw.append(DUMMY_W); vpred.append([prev]); vsucc.append([])
        vsucc[prev].append(d); hops.append(d); prev = d
    vsucc[prev].append(b); vpred[b].append(prev)
    chains[e] = hops
  order = _order(vlayer, vpred, vsucc, n)
  xs = _xs(order, vw, vpred, vsucc)
  heights = [0.0] * len(order)
  for k in range(n): heights[layer[k]] = max(heights[layer[k]], dims[k][1])
  tops, y = [], 0.0
  for h in heights: tops.append(y); y += h + GAP_Y
  left = min(xs[v] for v in range(len(vlayer)))
  pos = {units[k]: (xs[k] - left, tops[layer[k]]) for k in range(n)}   # top-aligned: beside a tall cluster, a box stays near its sources
  width = max(xs[v] + vw[v] for v in range(len(vlayer))) - left
  pts = {}
  for e, hops in chains.items():
    pts[e] = [p for d in hops for p in ((xs[d] - left + DUMMY_W / 2, tops[vlayer[d]]), (xs[d] - left + DUMMY_W / 2, tops[vlayer[d]] + heights[vlayer[d]]))]
  return width, y - GAP_Y, pos, pts


def _layers(n, succ, pred, last) -> list[int]:
  """Longest path from the sources, then each unit with users just above its first user;
  'last' units (a listing's owner) below everything."""
  indeg = [len(p) for p in pred]
  ready = [k for k in range(n) if indeg[k] == 0]
  topo, head = [], 0
  while head < len(ready):
    k = ready[head]; head += 1; topo.append(k)
    for t in succ[k]:
      indeg[t] -= 1
      if indeg[t] == 0: ready.append(t)
  if len(topo) < n: topo += [k for k in range(n) if indeg[k] > 0]   # a cycle cannot come from a graph; stay total anyway
  layer = [0] * n
  for k in topo:
    for t in succ[k]: layer[t] = max(layer[t], layer[k] + 1)
  for k in reversed(topo):
    if succ[k]:
      below = min(layer[t] for t in succ[k]) - 1
      if below > layer[k]: layer[k] = below
  if any(last):
    bottom = max(layer) + 1
    for k in range(n):
      if last[k] and not succ[k]: layer[k] = bottom
  return layer


def _order(vlayer, vpred, vsucc, n_units) -> list[list[int]]:
  """Vertices per layer, ordered by barycentric sweeps; the order with fewest crossings."""
  depth = max(vlayer) + 1
  order: list[list[int]] = [[] for _ in range(depth)]
  for v in range(len(vlayer)): order[vlayer[v]].append(v)   # units in file order, dummies after
  pos = [0] * len(vlayer)
  def renumber(layer_list):
    for i, v in enumerate(layer_list): pos[v] = i
  for lst in order: renumber(lst)
  best, best_x = [list(lst) for lst in order], _crossings(order, vlayer, vsucc, pos)
  for sweep in range(SWEEPS):
    down = sweep % 2 == 0
    rng = range(1, depth) if down else range(depth - 2, -1, -1)
    for lv in rng:
      nb = vpred if down else vsucc
      def key(v, nb=nb):
        ps = nb[v]
        return (sum(pos[p] for p in ps) / len(ps)) if ps else pos[v]
      order[lv].sort(key=key)
      renumber(order[lv])
    x = _crossings(order, vlayer, vsucc, pos)
    if x < best_x: best, best_x = [list(lst) for lst in order], x
  return best


def _crossings(order, vlayer, vsucc, pos) -> int:
  """Edge crossings between adjacent layers (inversions, counted with a Fenwick tree)."""
  total = 0
  for lv in range(len(order) - 1):
    size = len(order[lv + 1])
    if size < 2: continue
    ends = sorted((pos[u], pos[t]) for u in order[lv] for t in vsucc[u] if vlayer[t] == lv + 1)
    tree = [0] * (size + 1)
    for seen, (_, t) in enumerate(ends):
      i, le = t + 1, 0
      while i > 0: le += tree[i]; i -= i & -i
      total += seen - le
      i = t + 1
      while i <= size: tree[i] += 1; i += i & -i
  return total


def _xs(order, vw, vpred, vsucc) -> list[float]:
  """Left x of every vertex: packed, then pulled toward its neighbours' centres, layer by
  layer, down and up, the order and GAP_X kept."""
  x = [0.0] * len(vw)
  for lst in order:
    cur = 0.0
    for v in lst: x[v] = cur; cur += vw[v] + GAP_X
  for sweep in range(4):
    down = sweep % 2 == 0
    rng = range(1, len(order)) if down else range(len(order) - 2, -1, -1)
    for lv in rng:
      nb = vpred if down else vsucc
      want = []
      for v in order[lv]:
        ps = nb[v]
        c = sum(x[p] + vw[p] / 2 for p in ps) / len(ps) if ps else x[v] + vw[v] / 2
        want.append(c - vw[v] / 2)
      for v, xv in zip(order[lv], _isotonic(want, [vw[v] for v in order[lv]])): x[v] = xv
  return x


def _isotonic(want, widths) -> list[float]:
  """Positions closest (least squares) to `want` with x[i+1] >= x[i] + widths[i] + GAP_X:
  pool adjacent violators on want minus each box's packed offset."""
  off, cur = [], 0.0
  for w in widths: off.append(cur); cur += w + GAP_X
  blocks: list[list] = []          # [sum, count]
  for t in (w - o for w, o in zip(want, off)):
    blocks.append([t, 1])
    while len(blocks) > 1 and blocks[-2][0] / blocks[-2][1] > blocks[-1][0] / blocks[-1][1]:
      s, c = blocks.pop(); blocks[-1][0] += s; blocks[-1][1] += c
  out = []
  for s, c in blocks: out += [s / c] * c
  return [y + o for y, o in zip(out, off)]


# ------------------------------------------------------------------ absolute places
def _place(pic, local, sizes) -> Scene:
  """Absolute boxes, clusters and edge polylines from the per-scope layouts."""
  items, clusters = pic.items, pic.clusters
  ibox: list = [None] * len(items)
  cbox: list = [None] * len(clusters)
  origin = {TOP: (0.0, 0.0)}
  todo = [TOP]
  while todo:
    s = todo.pop()
    ox, oy = origin[s]
    for (kind, k), (x, y) in local[s][2].items():
      if kind == "i": ibox[k] = (ox + x, oy + y, *sizes[k])
      else:
        w, h = _cluster_size(local[k], clusters[k].title)
        cbox[k] = (ox + x, oy + y, w, h)
        origin[k] = (ox + x + (w - local[k][0]) / 2, oy + y + CL_TITLE)
        todo.append(k)
  scope_of_edge = {}
  for s, (_, _, _, pts) in local.items():
    for e, p in pts.items(): scope_of_edge[e] = (s, p)
  incoming: dict[int, list] = {}
  for e, edge in enumerate(pic.edges): incoming.setdefault(edge.dst, []).append(e)
  port = [None] * len(pic.edges)
  for b, es in incoming.items():
    es.sort(key=lambda e: (pic.edges[e].kind != "more", min(pic.edges[e].positions, default=0), e))
    x, y, w, _ = ibox[b]
    for r, e in enumerate(es): port[e] = (x + w * (r + 1) / (len(es) + 1), y)
  paths = []
  for e, edge in enumerate(pic.edges):
    x, y, w, h = ibox[edge.src]
    s, mid = scope_of_edge.get(e, (TOP, []))
    ox, oy = origin[s]
    paths.append([(x + w / 2, y + h), *((ox + px, oy + py) for px, py in mid), port[e]])
  width = local[TOP][0]
  height = local[TOP][1]
  return Scene(width, height, ibox, cbox, paths, port)
