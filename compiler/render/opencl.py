"""The OpenCL C target: one __kernel per kernel with a typed argument per PARAM; parallel
axes and SPECIALs are work-item ids (compiler/render/launch.py), LOCAL buffers are
__local arrays, BARRIER is the work-group's barrier."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.base import Renderer
from tinyspec.compiler.render.launch import Launch
from tinyspec.compiler.render.cases import value_type, storage_type


class OpenCLRenderer(Renderer):
  target = "opencl"
  index_ctype = "long"
  barrier = "barrier(CLK_LOCAL_MEM_FENCE);"

  def layout(self, instrs: list, specials: list) -> Launch:
    """SPECIALs' own launch sizes, else the parallel ranges as work items."""
    if not specials: return self.work_items(instrs)
    dims = self.special_dims(specials)
    gsize, lsize = [], []
    for d in range(max(dims) + 1):
      k = dims.get(d, {})
      if "t" in k and ("g" in k or "l" in k): raise CompileError("compile.unsupported", f"tidx{d} together with gidx{d}/lidx{d}")
      if "t" in k: gsize.append(k["t"]); lsize.append(1)
      else: gsize.append([k.get("g", 1), k.get("l", 1)]); lsize.append(k.get("l", 1))
    # always launch with this local size: a gidx is get_group_id, so without lidx each
    # work-group must be one work item (letting the device pick would merge gidx values)
    return Launch(gsize, lsize)

  def local_buffer(self, b: UOp, n: int, scratch: list) -> None:
    self.emit(f"__local {storage_type(props(b).dtype, 'opencl')} {self.names[b]}[{max(n, 1)}];")

  def signature(self, name: str, params) -> str:
    args = []
    for s, p in enumerate(params):
      if p[0] == "scalar": args.append(f"{value_type(p[1], 'opencl')} p{s}")
      else: args.append(f"__global {'' if p[3] else 'const '}{storage_type(p[1], 'opencl')}* {'restrict ' if self.noalias else ''}p{s}")
    return f"__kernel void {name}(" + ", ".join(args) + ")"

  def special(self, u: UOp) -> None:
    fn = self.T["special"]["opencl"][u.arg["name"][0]]
    self.emit(f"long {self.names[u]} = (long){fn}({int(u.arg['name'][-1])});")

  def special_work_ids(self, specials: list) -> dict:
    builtin = self.T["special"]["opencl"]
    return {f"{builtin[u.arg['name'][0]]}({u.arg['name'][-1]})": u for u in specials}
