"""The reference evaluator as a backend (`ref`, entry point group tinyspec.backends)."""
from __future__ import annotations
from tinyspec.backends import Backend, Capabilities, value_dtypes
from tinyspec.refimpl import supported_ops
from tinyspec.refimpl import evaluate


class RefBackend(Backend):
  """The NumPy reference evaluator (tinyspec.refimpl.evaluate)."""
  name = "ref"

  def capabilities(self) -> Capabilities:
    return Capabilities({k: frozenset(v) for k, v in supported_ops().items()}, value_dtypes())

  def run(self, graph, inputs):
    return dict(evaluate(graph, inputs))
