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
from tinyspec.compiler.props import CompileError
from tinyspec.compiler.pipeline import compile_graph, Compiled, STAGES
from tinyspec.compiler.support import supported_ops


def run(graph, inputs=None, backend: str = "c", opts=None, allow_untrusted: bool = False):
  """Compile graph for `backend` and run it once."""
  return compile_graph(graph, backend, opts, allow_untrusted, keep_stages=False).run(inputs)


__all__ = ["compile_graph", "Compiled", "CompileError", "run", "supported_ops", "STAGES"]
