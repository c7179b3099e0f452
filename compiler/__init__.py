"""The lowering compiler: tensor graphs to OpenCL C and C kernels (the pipeline of the Dialect document, spec/sources.yaml).

  compile_graph(graph, target="c"|"opencl", opts=None, beam=0) -> Compiled (stages, schedule, sources)
  run(graph, inputs, backend="c"|"opencl")            -> outputs keyed like refimpl.evaluate
  supported_ops(target)                                -> {op: {levels}}
  supported_dtypes(target)                             -> the dtypes it has a type for

See compiler/pipeline.py for the stages and spec/render.yaml for the render rules.
Kernel OptOps: compiler/passes/optimize.py (checked against ops.yaml axis_types/opt_ops), the
default ones compiler/passes/heuristics.py (per device, compiler/device.py), BEAM search
compiler/beam.py; device-dependent schedule rewrites: compiler/passes/split.py (long reductions
over OpenCL work-groups) and compiler/passes/layout.py (packed gemm inputs); Compiled.executable().bind(inputs) holds a program's storage for
repeated launches (benchmarks: bench/bench_kernels.py) and checks every symbolic size
before any launch. Soundness (README "What the compiler guarantees"): compiler/analysis/parallel.py
proves axes conflict-free before they run in parallel, compiler/passes/snapshots.py gives reads of
what a kernel writes their kernel-loops value, compiler/analysis/bounds.py proves or guards every
access, compiler/analysis/symbolic.py rewrites only under preconditions that hold modulo 2^bits.
"""
from tinyspec.compiler.errors import CompileError
from tinyspec import environment
from tinyspec.compiler.pipeline import lower, Compiled, STAGES
from tinyspec.compiler.support import supported_dtypes, supported_ops
from tinyspec.compiler.beam import best_opts


def compile_graph(g, target: str = "c", opts=None, allow_untrusted: bool = False, keep_stages: bool = True, beam: int | None = None, device=None,
                  trace=None) -> Compiled:
  """Compile a Graph (or a UOp / list of root UOps) for target "c" or "opencl".
  opts: OptOps for every kernel (a list), per kernel name (a dict), or None: the device's
  default -- the heuristics, or with beam=N (default $TINYSPEC_BEAM) a BEAM search of
  width N, its winner cached on disk (compiler/beam.py). device: a compiler.device.Device
  to compile for instead of the target's own (table_device("h100"): static GPU checks).
  trace: a tinyspec.rewrite.Trace counting the rules that fire, per stage."""
  if beam is None: beam = environment.integer("TINYSPEC_BEAM", 0, 0, environment.MAX_BEAM)
  search = None
  if beam > 0:
    def search(sink, target, dev): return best_opts(sink, target, beam, dev)
  return lower(g, target, opts, allow_untrusted, keep_stages, search, device, trace)


def run(graph, inputs=None, backend: str = "c", opts=None, allow_untrusted: bool = False, cast: bool = False):
  """Compile graph for `backend` and run it once (cast: see Executable.bind)."""
  return compile_graph(graph, backend, opts, allow_untrusted, keep_stages=False).run(inputs, cast=cast)


__all__ = ["compile_graph", "Compiled", "CompileError", "run", "supported_ops", "supported_dtypes", "STAGES"]
