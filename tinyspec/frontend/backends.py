"""Backends that realize Tensor graphs: anything with `run(graph, inputs) -> outputs`.

`graph` is a tinyspec Graph, `inputs` maps input names (`buf{slot}`, see
docs/architecture.md) to NumPy arrays, and the outputs come back keyed `out{k}` for the
k-th root. "ref" is the NumPy reference evaluator. Other backends register themselves:
`register_backend("c", obj)`; a name not registered yet makes the registry import the
`compiler` package once, so that it can register its targets on import.
"""
from __future__ import annotations
import importlib

_REGISTRY: dict[str, object] = {}
_TRIED_PLUGINS = False


class RefBackend:
  """The reference evaluator (refimpl.evaluate)."""
  name = "ref"

  def run(self, graph, inputs):
    from refimpl import evaluate
    return evaluate(graph, inputs)


def register_backend(name: str, backend) -> None:
  if not callable(getattr(backend, "run", None)):
    raise TypeError(f"backend {name!r} needs a run(graph, inputs) method")
  _REGISTRY[name] = backend


def backend_names() -> list[str]:
  return sorted(_REGISTRY)


def get_backend(backend):
  """A backend object from a name or an object with `run`."""
  global _TRIED_PLUGINS
  if not isinstance(backend, str):
    if callable(getattr(backend, "run", None)): return backend
    raise TypeError(f"a backend is a registered name or an object with run(graph, inputs), not {type(backend).__name__}")
  if backend not in _REGISTRY and not _TRIED_PLUGINS:
    _TRIED_PLUGINS = True
    try: importlib.import_module("compiler")
    except ModuleNotFoundError as e:
      if e.name != "compiler": raise
  if backend not in _REGISTRY:
    raise KeyError(f"unknown backend {backend!r}; registered: {', '.join(backend_names())}")
  return _REGISTRY[backend]


register_backend("ref", RefBackend())
