"""A failure made smaller after Hypothesis has shrunk the draws that found it: fewer
outputs for a failure of the whole graph, one element of each input for a value failure.
Either is kept only where it fails the same way (the same Failure.signature).
"""
from __future__ import annotations
import numpy as np
from tinyspec.dispatch import input_name
from tinyspec.frozen import thaw
from tinyspec.graph import Graph, Node
from tinyspec.tables import tables
from tinyspec.validate import validate
from tinyspec.conformance.fuzz.checks import Failure, check_example, views_of
from tinyspec.conformance.fuzz.graphs import Drawn

MAX_POSITIONS = 32   # output positions tried, one element of each input at a time


def smaller(f: Failure, runner, stage_backend, decomposed: bool) -> Failure:
  """f, or a smaller failure of the same kind (see the module doc)."""
  if f.node is None: return fewer_outputs(f, runner, stage_backend, decomposed)
  if f.prop == "values": return one_element(f, runner, decomposed)
  return f


def fewer_outputs(f: Failure, runner, stage_backend, decomposed: bool) -> Failure:
  """A failure of the whole graph (a crash, a refusal, a stage): the graph of one output
  and what it reads, where that alone fails the same way (outputs tried in order)."""
  d = f.drawn
  for i in sorted(d.outputs.values()):
    small = d.outputs_only([i])
    if len(small.graph.nodes) >= len(d.graph.nodes): continue
    g = check_example(small, runner, stage_backend, decomposed)
    if g is not None and g.signature == f.signature: return g
  return f


def one_element(f: Failure, runner, decomposed: bool) -> Failure:
  """A value failure of a tensor graph of per-element ops: the same graph on one element
  of each input (the elements a failing position reads), where that fails the same way.
  Hypothesis shrinks the draws; this shrinks the data."""
  d = f.case()
  if d.level != "tensor" or any(d.graph.nodes[i].op not in tables().alu_ops for i in d.outputs.values()): return f
  views = views_of(d.graph)
  shape = views[max(d.outputs.values())].shape
  for p in range(min(int(np.prod(shape)) if shape else 1, MAX_POSITIONS)):
    small = _at_position(d, views, np.unravel_index(p, shape) if shape else ())
    if small is None: continue
    h = check_example(small, runner, None, decomposed, only="values")
    if h is not None and h.signature == f.signature: return h
  return f


def _at_position(d: Drawn, views, pos: tuple) -> Drawn | None:
  """d with every input holding the one element that position `pos` of the (broadcast)
  output reads, its dims all 1 (one shape operand per rank)."""
  g, inputs_of = d.graph, tables().input_ops
  nodes, ins, new, ones = [], {}, {}, {}
  for i, n in enumerate(g.nodes):
    if n.op in inputs_of:
      sh = views[i].shape
      if len(sh) not in ones:
        nodes.append(Node("VCONST", [], {"values": [1] * len(sh), "dtype": "index"}))
        ones[len(sh)] = len(nodes) - 1
      name = input_name(n.op, n.arg)
      idx = tuple(pos[len(pos) - len(sh) + k] if sh[k] > 1 else 0 for k in range(len(sh)))
      ins[name] = np.asarray(d.inputs[name])[idx].reshape((1,) * len(sh))
      nodes.append(Node(n.op, [ones[len(sh)]], thaw(n.arg)))
    else:
      nodes.append(Node(n.op, [new[j] for j in n.src], thaw(n.arg)))
    new[i] = len(nodes) - 1
  outs = {k: new[i] for k, i in d.outputs.items()}
  known = {new[i]: ins[input_name(g.nodes[i].op, g.nodes[i].arg)] if g.nodes[i].op in inputs_of else v for i, v in d.values.items()}
  order = [outs[f"out{k}"] for k in range(len(outs))]
  small = Drawn(Graph(nodes, order, "tensor"), ins, "tensor", outs, known, d.tables).outputs_only(order)
  return small if validate(small.graph).ok else None
