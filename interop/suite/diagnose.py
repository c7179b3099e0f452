"""Diagnoses: show the cause of a disagreement by redoing tinygrad's step on the graph.

A graph whose reference values disagree with tinygrad's is rewritten the way a documented
tinygrad behaviour rewrites it (docs/tinygrad-bugs.md), then evaluated again and compared
with tinygrad's values within the portable bound (interop.script's own comparison). When
the rewritten graph agrees, the diagnosis is confirmed and recorded with the verdict; a
rule of classes.yaml may ask for it (`diagnosis: NAME`), so a failure is put in a class
by what was shown, not by the look of its message.

  c-association  (c-renderer-reassociates) the C-style renderer drops the parentheses of
                 an inlined ADD/MUL operand of an ADD/MUL (renderer/cstyle.py strip_parens):
                 `a + (b + c)` is rendered `a+b+c`, which C evaluates as `(a + b) + c`.
                 A node is inlined when its only consumer is that node (cstyle.py: an ALU
                 op other than WHERE with one child). Program level.
  cast-pair-fold (image-cast-fold) `x.cast(float16).cast(float32)` of a float32 x is
                 folded to x (codegen/late/coalesce.py's image rules, every kernel).
                 Tensor and kernel level.
  recip-cancellation (recip-cancellation) uop/symbolic.py's `x*d -> 1-d`, `x*(d*y) ->
                 y*(1-d)` and `x*(d+y) -> (1-d)+x*y` for d = 1/(1+x), each operand order
                 (tinygrad matches MUL and ADD either way round). Tensor and kernel level.
  mul-zero-fold  (mul-zero-fold) uop/symbolic.py's `x*0 -> 0` for a float x that is not a
                 constant NaN or inf ("this can be wrong for loaded NaN"). Tensor and kernel level.
"""
from __future__ import annotations
from collections import Counter
from tinyspec.dispatch import Registry
from tinyspec.graph import Graph, Node
from tinyspec.interop.script import _evaluate_and_compare
from tinyspec.validate import validate

DIAGNOSES = Registry("tinygrad suite diagnosis", ops=False)   # name -> rewrite(graph, dtypes) -> Graph | None
LEVELS = {"c-association": ("program",), "cast-pair-fold": ("tensor", "kernel"),   # where each applies
          "recip-cancellation": ("tensor", "kernel"), "mul-zero-fold": ("tensor", "kernel")}


def diagnose(g) -> tuple[list[str], list[str]]:
  """For a GraphResult g that disagrees with tinygrad: (the diagnoses confirmed, the
  diagnoses whose pattern the graph holds: their rewrite changes it, confirmed or not)."""
  res = validate(g.graph)
  if not res.ok: return [], []
  dtypes = [v.dtype for v in res.views]   # as the spec derives them
  shown, present = [], []
  for name in DIAGNOSES.names():
    if g.level not in LEVELS[name] or (h := DIAGNOSES[name](g.graph, dtypes)) is None: continue
    present.append(name)
    verdict = _evaluate_and_compare(h, g.inputs, g.expected)[0]
    if verdict.startswith("ok"): shown.append(name)
  return shown, present


def _float(dtype) -> bool:
  return isinstance(dtype, str) and (dtype.startswith("float") or dtype == "bfloat16")


def _rebuild(graph: Graph, expand) -> Graph | None:
  """The graph with each node i for which expand(i, where, start) returns a list of Nodes
  replaced by them (their src are new indices, where[j] the new index of old node j, start
  the new index of the first; the last stands for i). A LINEAR lists the inserted nodes
  too, before the one they replace. None when nothing changed."""
  new, where, added = [], {}, {}
  for i, n in enumerate(graph.nodes):
    repl = expand(i, where, len(new))
    if repl is None:
      src = [x for j in n.src for x in ([*added.get(j, ()), where[j]] if n.op == "LINEAR" else [where[j]])]
      new.append(Node(n.op, src, n.arg, n.dtype, n.shape, n.tag, n.name))
    else:
      added[i] = list(range(len(new), len(new) + len(repl) - 1))
      new.extend(repl)
    where[i] = len(new) - 1
  if not added: return None
  roots = None if graph.roots is None else [where[r] for r in graph.roots]
  return Graph(new, roots, graph.level, dict(graph.meta))


@DIAGNOSES.register("c-association")
def c_association(graph: Graph, dtypes: list) -> Graph | None:
  nodes = graph.nodes
  uses = Counter(j for n in nodes if n.op != "LINEAR" for j in n.src)
  def inlined_same(j, op): return nodes[j].op == op and uses[j] == 1

  def terms(j, op) -> list[int]:   # the operands C sees in the rendered text of node j, left to right
    if not inlined_same(j, op): return [j]
    return [t for s in nodes[j].src for t in terms(s, op)]

  def expand(i, where, start):
    n = nodes[i]
    if n.op not in ("ADD", "MUL") or not _float(dtypes[i]) or len(n.src) != 2 or not inlined_same(n.src[1], n.op): return None
    flat = terms(n.src[0], n.op) + terms(n.src[1], n.op)   # only the right operand's parentheses change the order
    out, acc = [], where[flat[0]]
    for t in flat[1:]:
      out.append(Node(n.op, (acc, where[t]), None, n.dtype, n.shape))
      acc = start + len(out) - 1
    return out

  return _rebuild(graph, expand)


@DIAGNOSES.register("cast-pair-fold")
def cast_pair_fold(graph: Graph, dtypes: list) -> Graph | None:
  nodes = graph.nodes
  def expand(i, where, start):
    n = nodes[i]
    if n.op != "CAST" or dtypes[i] != "float32" or nodes[n.src[0]].op != "CAST" or dtypes[n.src[0]] != "float16": return None
    x = nodes[n.src[0]].src[0]
    if dtypes[x] != "float32": return None
    return [Node("CAST", (where[x],), n.arg, n.dtype, n.shape)]   # a CAST to x's own dtype: x, standing for node i
  return _rebuild(graph, expand)


def _constant(nodes, j):
  """The value of the CONST node j stands for (through the RESHAPE and EXPAND that shape it at
  tensor level), or None."""
  while nodes[j].op in ("RESHAPE", "EXPAND"): j = nodes[j].src[0]
  return nodes[j].arg.get("value") if nodes[j].op == "CONST" and isinstance(nodes[j].arg, dict) else None


@DIAGNOSES.register("mul-zero-fold")
def mul_zero_fold(graph: Graph, dtypes: list) -> Graph | None:
  nodes = graph.nodes
  def expand(i, where, start):
    n = nodes[i]
    if n.op != "MUL" or not _float(dtypes[i]) or len(n.src) != 2: return None
    for x, zero in (n.src, tuple(reversed(n.src))):
      if _constant(nodes, zero) == 0 and _constant(nodes, x) is None:   # a constant x keeps its NaN or inf
        # tinygrad's x.const_like(0): a 0 of x's shape (a select between two zeros on a condition shaped like x)
        return [Node("CMPNE", (where[x], where[x])), Node("WHERE", (start, where[zero], where[zero]))]
    return None
  return _rebuild(graph, expand)


@DIAGNOSES.register("recip-cancellation")
def recip_cancellation(graph: Graph, dtypes: list) -> Graph | None:
  nodes = graph.nodes
  def base(j):   # through MULs by the constant 1 (tinygrad folds x*1 to x before these rules; exact)
    while nodes[j].op == "MUL" and len(nodes[j].src) == 2:
      a, b = nodes[j].src
      if _constant(nodes, b) == 1: j = a
      elif _constant(nodes, a) == 1: j = b
      else: break
    return j
  def recip_of_one_plus(d, x):   # d = RECIP(ADD(1, x)): the node giving 1, else None
    if nodes[d].op != "RECIP" or nodes[nodes[d].src[0]].op != "ADD": return None
    a, b = nodes[nodes[d].src[0]].src
    return a if base(b) == x and _constant(nodes, a) == 1 else b if base(a) == x and _constant(nodes, b) == 1 else None
  def pairs(j): return [(base(p), base(q)) for p, q in (nodes[j].src, tuple(reversed(nodes[j].src)))]

  def expand(i, where, start):
    n = nodes[i]
    if n.op != "MUL" or not _float(dtypes[i]) or len(n.src) != 2: return None
    for x, other in pairs(i):
      if (c1 := recip_of_one_plus(other, x)) is not None:                       # x * d -> 1 - d
        return [Node("SUB", (where[c1], where[other]))]
      for op in ("MUL", "ADD"):
        if nodes[other].op != op: continue
        for d, y in pairs(other):
          if (c1 := recip_of_one_plus(d, x)) is None: continue
          if op == "MUL":                                                        # x * (d*y) -> y * (1-d)
            return [Node("SUB", (where[c1], where[d])), Node("MUL", (where[y], start))]
          return [Node("SUB", (where[c1], where[d])), Node("MUL", (where[x], where[y])),   # x * (d+y) -> (1-d) + x*y
                  Node("ADD", (start, start + 1))]
    return None
  return _rebuild(graph, expand)
