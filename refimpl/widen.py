"""The `wide-intermediates` variant (spec/ops.yaml decision half-intermediates) as a graph:
float16 and bfloat16 results kept in float32 while elementwise ops read them.

    g2 = widen_intermediates(g, views)   # evaluate g2 for the variant's outputs

Every node of an op the decision lists (`ops`) whose dtype is one the variant covers is
computed in float32 from its sources' wide values (a wide node); an elementwise op reads a
source's wide value (a CAST to the wide dtype becomes that value itself, an explicit CAST
to float16/bfloat16 rounds it); anything else (stores, movement, reductions, outputs)
reads the value rounded to the node's dtype, as a kernel stores it. The outputs keep their
names and dtypes. Ops are named only through the tables.
"""
from __future__ import annotations
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.portable import WIDE_VARIANT as VARIANT, WIDE_DECISION as DECISION
from tinyspec.portable import variant_scope
WIDE = "float32"


def widen_intermediates(g: Graph, views) -> Graph:
  T = tables()
  scope = variant_scope(VARIANT)
  producers = set(T.decisions[DECISION]["ops"])
  narrow = set().union(*[d for d in scope.values() if d]) if scope else set()
  nodes: list[Node] = []
  rounded: dict[int, int] = {}   # old node -> the node holding its value in its own dtype
  wide: dict[int, int] = {}      # old node -> its float32 value (a wide node)

  def add(op, src, arg=None, like: Node | None = None) -> int:
    nodes.append(Node(op, src, arg, like.dtype if like is not None else None, like.shape if like is not None else None))
    return len(nodes) - 1

  def widened(j: int) -> int:
    """Source j as a float32 value: its wide node, or its value converted (exactly)."""
    if j in wide: return wide[j]
    return add("CAST", [rounded[j]], WIDE) if views[j].dtype in narrow else rounded[j]

  for i, n in enumerate(g.nodes):
    dt = views[i].dtype
    elementwise = n.op in T.alu_ops
    reads_wide = elementwise and any(j in wide for j in n.src)
    if elementwise and n.op in producers and dt in narrow and (reads_wide or any(views[j].dtype in narrow for j in n.src)):
      wide[i] = add(n.op, [widened(j) if views[j].dtype in narrow else rounded[j] for j in n.src], n.arg)
      rounded[i] = add("CAST", [wide[i]], dt, n)
    elif reads_wide and n.op == "CAST" and dt == WIDE:
      rounded[i] = wide[n.src[0]]   # the float32 value it held all along
    elif reads_wide:
      srcs = [widened(j) if views[j].dtype in narrow else rounded[j] for j in n.src]
      rounded[i] = add(n.op, srcs, n.arg, n if n.op == "CAST" or dt not in narrow else None)
      if dt in narrow and n.op != "CAST": wide[i], rounded[i] = rounded[i], add("CAST", [rounded[i]], dt, n)
    else:
      rounded[i] = add(n.op, [rounded[j] for j in n.src], n.arg, n)
      nodes[-1].tag, nodes[-1].name = n.tag, n.name
  return Graph(nodes, [rounded[r] for r in g.root_indices], g.level, dict(g.meta))
