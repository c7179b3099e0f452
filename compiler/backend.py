"""The compiler's targets as backends (`c`, `opencl`; entry point group tinyspec.backends)."""
from __future__ import annotations
from tinyspec.backends import Backend, Capabilities, value_dtypes


class CompilerBackend(Backend):
  """One target of the lowering compiler (compile_graph + its runtime)."""
  batch = 48
  target = "?"

  def __init__(self, target: str | None = None):
    if target: self.target = target
    self.name = self.target

  def capabilities(self) -> Capabilities:
    from tinyspec.compiler.support import supported_ops
    return Capabilities({k: frozenset(v) for k, v in supported_ops(self.target).items()}, value_dtypes(), decomposed=True)

  def run(self, graph, inputs):
    from tinyspec.compiler import run
    return run(graph, inputs, self.target)

  def stages(self, graph) -> dict:
    from tinyspec.compiler import compile_graph
    return dict(compile_graph(graph, self.target, keep_stages=True).stages)


class CBackend(CompilerBackend):
  target = "c"


class OpenCLBackend(CompilerBackend):
  target = "opencl"

  def capabilities(self) -> Capabilities:
    from tinyspec.compiler.runtime.opencl import device
    device()   # raises when there is no OpenCL device: the backend is unavailable
    return super().capabilities()
