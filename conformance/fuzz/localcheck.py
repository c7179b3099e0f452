"""A drawn graph's node evaluated alone, on the values its sources had: what the fuzz
(conformance/fuzz/checks.py) checks a backend's value of each node against, one node at a
time, so that tolerances do not compound along a chain and the first differing node is
named; the tinygrad triage (interop/hunt.py) writes the same graph as a repro.
"""
from __future__ import annotations
import numpy as np
from tinyspec import portable as P
from tinyspec.dispatch import input_name
from tinyspec.graph import Graph, Node
from tinyspec.frozen import thaw
from tinyspec.tables import tables
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.numeric import np_dtype
from tinyspec.conformance.fuzz.graphs import Drawn


def local_reference(d: Drawn, views, i: int, known: dict, variants=()):
  """The reference evaluator's value of node i's op on the given values of its sources,
  and those source values (for the tolerance): local_graph() evaluated. For the variant
  whose values are read unrounded (wide-intermediates) the sources it covers are
  computed again in the local graph (from their own sources' values), unrounded."""
  g, inputs, operands, out = local_graph(d, views, i, known, inline=P.WIDE_VARIANT in variants)
  return evaluate(g, inputs, variants=variants)[out], operands


def local_graph(d: Drawn, views, i: int, known: dict, inline: bool = False):
  """Node i alone, at its own level: (graph, inputs, the source values, the output's name).
  Every value source with a known value becomes an input holding it (a BUFFER; in a
  kernel, a load from a PARAM over the same loop), constants and shape operands are copied.
  inline: the sources the wide-intermediates variant reads unrounded (float16/bfloat16
  elementwise ones) are computed again, up to 3 levels deep."""
  T = tables()
  wide = {dt for dts in P.variant_scope(P.WIDE_VARIANT).values() if dts for dt in dts}
  g = d.graph
  kernel = d.level == "kernel"
  nodes, inputs, operands = [], {}, []
  def add(op, srcs=(), arg=None):
    nodes.append(Node(op, list(srcs), arg)); return len(nodes) - 1
  if kernel:
    length = next(int(thaw(g.nodes[x.src[0]].arg)["value"]) for x in g.nodes if x.op == "RANGE")
    rng = add("RANGE", [add("CONST", [], {"value": length, "dtype": "index"})], {"id": 0, "type": "LOOP"})
    vec = add("VCONST", [], {"values": [length], "dtype": "index"})

  def source(j: int, depth: int) -> int:
    m = g.nodes[j]
    if depth and m.op in T.alu_ops and views[j].dtype in wide:
      return operation(j, depth - 1, [])
    if j in known and m.op != "CONST":
      v = np.asarray(known[j])
      op, arg = ("PARAM", {"slot": len(inputs), "dtype": views[j].dtype}) if kernel else \
                ("BUFFER", {"slot": len(inputs), "dtype": views[j].dtype, "device": "CPU"})
      inputs[input_name(op, arg)] = v
      if kernel: return add("INDEX", [add(op, [vec], arg), rng])
      return add(op, [add("VCONST", [], {"values": list(v.shape), "dtype": "index"})], arg)
    return add(m.op, [], thaw(m.arg))

  def operation(j: int, depth: int, values: list) -> int:
    m = g.nodes[j]
    o = T.ops[m.op]
    src = []
    for k, s in enumerate(m.src):
      value = o.slot_for(k).kind == "value"
      src.append(source(s, depth) if value else add(g.nodes[s].op, [], thaw(g.nodes[s].arg)))
      if value and s in known: values.append(np.asarray(known[s]))
      elif value and g.nodes[s].op == "CONST": values.append(_const_value(thaw(g.nodes[s].arg)))
    return add(m.op, src, thaw(m.arg))

  node = operation(i, 3 if inline else 0, operands)
  if not kernel: return Graph(nodes), inputs, operands, "out0"
  arg = {"slot": len(inputs), "dtype": views[i].dtype}
  out = add("PARAM", [vec], arg)
  add("SINK", [add("END", [add("STORE", [add("INDEX", [out, rng]), node]), rng])])
  return Graph(nodes, level="kernel"), inputs, operands, input_name("PARAM", arg)


def _const_value(arg: dict) -> np.ndarray:
  """A CONST's value as a ()-shaped array of its dtype (an operand of the checked op)."""
  v = arg["value"]
  return np.asarray(float(v) if isinstance(v, str) else v).astype(np_dtype(arg["dtype"]))
