"""The lowering compiler: tensor graphs to OpenCL C and C kernels (seed 001's pipeline).

  compile_graph(graph, target="c"|"opencl", opts=None, beam=0) -> Compiled (stages, schedule, sources)
  run(graph, inputs, backend="c"|"opencl")            -> outputs keyed like refimpl.evaluate
  supported_ops(target)                                -> {op: {levels}}

See compiler/pipeline.py for the stages and spec/render.yaml for the render rules.
Kernel OptOps: compiler/optimize.py (checked against ops.yaml axis_types/opt_ops), the
default ones compiler/heuristics.py (per device, compiler/device.py), BEAM search
compiler/beam.py; device-dependent schedule rewrites: compiler/split.py (long reductions
over OpenCL work-groups) and compiler/layout.py (packed gemm inputs); Compiled.executable().bind(inputs) holds a program's storage for
repeated launches (benchmarks: bench/bench_kernels.py).
"""
from compiler.props import CompileError
from compiler.pipeline import compile_graph, Compiled, STAGES
from compiler.support import supported_ops


def run(graph, inputs=None, backend: str = "c", opts=None, allow_untrusted: bool = False):
  """Compile graph for `backend` and run it once."""
  return compile_graph(graph, backend, opts, allow_untrusted, keep_stages=False).run(inputs)


class Backend:
  """A front-end backend (tinyspec.frontend.backends): run(graph, inputs) -> outputs."""
  def __init__(self, target: str): self.name = self.target = target
  def run(self, graph, inputs): return run(graph, inputs, self.target)


def _register():
  try:
    from tinyspec.frontend.backends import register_backend
  except ImportError:
    return
  for t in ("c", "opencl"): register_backend(t, Backend(t))


_register()

__all__ = ["compile_graph", "Compiled", "CompileError", "run", "supported_ops", "STAGES"]
