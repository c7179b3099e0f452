"""The forward error bound of tinyspec/errorbound.py evaluated: the rewritten graph that
computes every output next to its bound, run by the reference evaluator once.

    outputs, bounds = evaluate_with_bounds(graph, inputs)
"""
from __future__ import annotations
import numpy as np
from tinyspec.errorbound import shadow
from tinyspec.graph import Graph
from tinyspec.refimpl import evaluate


def evaluate_with_bounds(graph: Graph, inputs: dict, decomposed: bool = True, budget=None) -> tuple[dict, dict]:
  """(the reference's outputs, {output name: float64 array of absolute bounds}) from one
  evaluation of the rewritten graph (under evaluate()'s memory budget)."""
  sg, names = shadow(graph, decomposed)
  out = evaluate(sg, dict(inputs), budget=budget)
  bounds = {k: np.asarray(out[v], np.float64) for k, v in names.items() if v in out}
  shadows = set(names.values())
  return {k: v for k, v in out.items() if k not in shadows}, bounds

