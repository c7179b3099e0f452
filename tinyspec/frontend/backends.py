"""Backends that realize Tensor graphs: anything with `run(graph, inputs) -> outputs`.

The front end uses the one registry of tinyspec/backends.py, which the conformance runner
uses too: the built-ins `ref` (the NumPy reference evaluator), `c` and `opencl` (the
compiler) come from the entry point group `tinyspec.backends`; `register_backend(name,
obj)` adds any object with `run(graph, inputs)`. `graph` is a tinyspec Graph, `inputs`
maps input names (`buf{slot}`: tinyspec.dispatch.input_name) to NumPy arrays, and the outputs
come back keyed `out{k}` for the k-th root.
"""
from __future__ import annotations
from tinyspec.backends import backend_names, get_backend
from tinyspec.backends import register_backend as _register


def register_backend(name: str, backend) -> None:
  """Add a backend under `name`. A name an entry point provides keeps its entry-point
  backend."""
  if not callable(getattr(backend, "run", None)):
    raise TypeError(f"backend {name!r} needs a run(graph, inputs) method")
  _register(name, backend, replace=False)


__all__ = ["register_backend", "get_backend", "backend_names"]
