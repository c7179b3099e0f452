"""The compiler's targets as backends (`c`, `opencl`; entry point group tinyspec.backends)."""
from __future__ import annotations
from tinyspec.backends import Backend, Capabilities, Unavailable, value_dtypes
from tinyspec.compiler.support import supported_dtypes, supported_ops
from tinyspec.compiler import run
from tinyspec.compiler import compile_graph
from tinyspec.compiler.runtime.c import compiler_info
from tinyspec.compiler.runtime.opencl import device
from tinyspec.compiler.runtime import opencl as R


class CompilerBackend(Backend):
  """One target of the lowering compiler (compile_graph + its runtime)."""
  batch = 48
  target = "?"

  def __init__(self, target: str | None = None):
    if target: self.target = target
    self.name = self.target

  def capabilities(self) -> Capabilities:
    return Capabilities({k: frozenset(v) for k, v in supported_ops(self.target).items()}, value_dtypes() & supported_dtypes(self.target), decomposed=True)

  def run(self, graph, inputs):
    return run(graph, inputs, self.target)

  def stages(self, graph) -> dict:
    return dict(compile_graph(graph, self.target, keep_stages=True).stages)


class CBackend(CompilerBackend):
  target = "c"

  def capabilities(self) -> Capabilities:
    compiler_info()   # raises Unavailable without a C compiler
    return super().capabilities()

  def describe(self) -> dict:
    try: cc = compiler_info()
    except Unavailable as e: return {"status": "unavailable", "why": str(e), "details": []}
    return {"status": "ok", "details": [f"C compiler: {cc['path']} ({cc['version']})"]}


class OpenCLBackend(CompilerBackend):
  target = "opencl"
  device_variable = "TINYSPEC_OPENCL_DEVICE"

  def capabilities(self) -> Capabilities:
    device()   # raises when no OpenCL device builds a kernel: the backend is unavailable
    return super().capabilities()

  def describe(self) -> dict:
    lines = []
    try:
      for row in R.survey():
        lines.append(f"{row['index']} {row['device']}: " + ("builds" if row["builds"] else f"cannot build ({row['why']})"))
    except Unavailable as e:
      lines.append(str(e).splitlines()[0])
    lib = R.oclgrind_library()
    lines.append(f"Oclgrind: {lib} (TINYSPEC_OPENCL_DEVICE=Oclgrind selects it)" if lib else
                 "Oclgrind: not installed (apt-get install oclgrind; the GPU kernels' race and bounds checks use it)")
    try:
      _, _, d = R.device()
      want = R.wanted()
      head = f"device: {d.name.strip()} [{d.platform.version.strip().split('  ')[0]}]" + (f" (TINYSPEC_OPENCL_DEVICE={want})" if want else " (the first that builds)")
      return {"status": "ok", "details": [head] + lines}
    except Unavailable as e:
      return {"status": "unavailable", "why": str(e), "details": lines}
