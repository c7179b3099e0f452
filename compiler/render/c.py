"""The C target: one function per kernel taking the buffers and scalar values as arrays
(`bufs`, `vals`), the slice [tlo, thi) of its threaded axis and the phase (compiler/
runtime/c.py runs the slices on threads, then phase 1 once). SPECIALs are loops around
the body; LOCAL buffers are scratch the runtime passes after the PARAMs."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.base import Renderer
from tinyspec.compiler.render.launch import Launch
from tinyspec.compiler.render.cases import value_type, storage_type


class CRenderer(Renderer):
  target = "c"
  index_ctype = "int64_t"
  float_suffix_fields = True   # C's float math functions are sinf, sqrtf, ...

  def check(self, instrs: list, specials: list) -> None:
    if any(u.op == "BARRIER" for u in instrs) and any(u.arg["name"][0] == "l" for u in specials):
      # C runs the work items of a SPECIAL as a loop, one after another: the workgroup never meets at the barrier
      raise CompileError("compile.unsupported", "a BARRIER among local work items (lidx SPECIALs): C runs them one after another; the opencl target runs workgroups")

  def layout(self, instrs: list, specials: list) -> Launch:
    """A loop per SPECIAL around the whole body (begin), else the threaded axis (if any)."""
    if specials:
      self.special_dims(specials)     # (one SPECIAL per kind and dimension)
      return Launch()
    thread, tail = self.thread_axis(instrs)
    return Launch(thread=thread, tail=tail)

  def begin(self, specials: list) -> None:
    for k, u in enumerate(specials):
      self.emit(f"for ({self.index_ctype} s{k} = 0; s{k} < {self.ref(u.src[0])}; s{k}++) {{")
      self.depth += 1

  def local_buffer(self, b: UOp, n: int, scratch: list) -> None:
    scratch.append(max(n, 1) * _dt(props(b).dtype).itemsize)

  def signature(self, name: str, params) -> str:
    pre = self.T["targets"]["c"].get("gated_loads", "") if self.gated_loads else ""
    return f"{pre}void {name}(void** bufs, const int64_t* vals, int64_t tlo, int64_t thi, int64_t phase)"

  def unpack(self, params) -> str:
    out = []
    for s, p in enumerate(params):
      if p[0] == "scalar": out.append(f"  {value_type(p[1], 'c')} p{s} = ({value_type(p[1], 'c')})vals[{s}];")
      else:
        t = storage_type(p[1], "c")
        q = "" if p[3] else "const "
        out.append(f"  {q}{t}* {'restrict ' if self.noalias else ''}p{s} = ({q}{t}*)bufs[{s}];")
    for k, b in enumerate(self.facts.locals):   # LOCAL buffers: scratch the runtime passes after the PARAMs
      t = storage_type(props(b).dtype, "c")
      out.append(f"  {t}* {self.names[b]} = ({t}*)bufs[{len(params) + k}];")
    out.append("  (void)bufs; (void)vals; (void)tlo; (void)thi; (void)phase;")
    return "\n".join(out) + "\n"
