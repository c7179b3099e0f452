"""One handler per instruction of a linearized kernel (the Registry INSTR); an op without
one is elementwise when render.yaml has cases for it (`alu`). A handler gets the renderer
`r`, the node and the stack of enclosing IF gates."""
from __future__ import annotations
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.tables import tables
from tinyspec.dispatch import Registry
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.cases import fill, value_type, utype
from tinyspec.compiler.render.nodes import base_of, is_reg, is_local, numel

INSTR = Registry("render instruction")


@INSTR.register("PARAM", "CONST", "VCONST", "SINK", "GROUP")
def _named_elsewhere(r, u: UOp, gates: list):
  """Named before the walk (PARAMs) or written where used (constants); no code."""


@INSTR.register("RANGE")
def _range(r, u: UOp, gates: list):
  name = f"r{u.arg['id']}"
  r.names[u] = name
  bound = r.ref(u.src[0])
  if u in r.launch.ids:
    r.emit(f"long {name} = (long){r.launch.ids[u]};")
    if u in r.launch.guarded:   # a lane narrower than the work-group: the items above it skip the body
      r.emit(f"if ({name} < {bound}) {{")
      r.depth += 1
    return
  start, stop = ("tlo", "thi") if u is r.launch.thread else ("0", bound)
  if u is r.launch.thread and r.launch.tail:   # phase 0: this slice of the loop; phase 1: what follows it
    r.emit("if (phase == 0) {")
    r.depth += 1
  r.emit(f"for ({r.index_ctype} {name} = {start}; {name} < {stop}; {name}++) {{")
  r.depth += 1


@INSTR.register("END")
def _end(r, u: UOp, gates: list):
  if u.src[1] in r.launch.guarded and u.src[1] in r.launch.ids:
    r.depth -= 1
    r.emit("}")
  if u.src[1] in r.launch.ids: return
  r.depth -= 1
  r.emit("}")
  if u.src[1] is r.launch.thread and r.launch.tail:
    r.stream_fence()
    r.emit("return;")
    r.depth -= 1
    r.emit("}")


@INSTR.register("BARRIER")
def _barrier(r, u: UOp, gates: list):
  """The work-group's barrier; on C nothing (the phase boundary, or the loop ran in order)."""
  if r.barrier is not None: r.emit(r.barrier)


@INSTR.register("IF")
def _if(r, u: UOp, gates: list):
  r.emit(f"if ({r.ref(u.src[0])}) {{")
  r.depth += 1
  gates.append(u.src[0])


@INSTR.register("ENDIF")
def _endif(r, u: UOp, gates: list):
  r.depth -= 1
  r.emit("}")
  gates.pop()


@INSTR.register("BUFFER")
def _buffer(r, u: UOp, gates: list):
  if is_local(u): return      # declared at the top (OpenCL __local) or passed as scratch (C)
  if props(u).addrspace != "REG": raise CompileError("compile.unsupported", f"{props(u).addrspace} buffers are not rendered inside kernels", u)
  name = f"acc{u.arg['slot']}"
  r.names[u] = name
  if u in r.facts.reg_arrays:   # zeroed, as REG storage starts (decision store-order)
    r.emit(f"{value_type(props(u).dtype, r.target)} {name}[{max(numel(props(u).shape), 1)}] = {{0}};")
  elif r.unsigned_acc(u): r.emit(f"{utype(max(8, _dt(props(u).dtype).bits))} {name};")
  else: r.emit(f"{r.type_of(u)} {name};")


@INSTR.register("AFTER")
def _after(r, u: UOp, gates: list):
  base = base_of(u)
  s = u.src[0]
  if not r.facts.used_as_value(u) or base in r.facts.reg_arrays: r.names[u] = r.names.get(base, "")   # (a REG array is read through INDEX)
  elif is_reg(base): r.declare(u, r.names[base])
  elif s.op == "INDEX": r.declare(u, r.read(s))
  else: r.names[u] = r.ref(s)


@INSTR.register("INDEX")
def _index(r, u: UOp, gates: list):
  b = base_of(u.src[0])
  if (u.src[0].op == "PARAM" or is_local(b) or b in r.facts.reg_arrays) and r.facts.used_as_value(u): r.declare(u, r.read(u))
  elif not (b.op in tables().storage_ops or is_local(b)):   # a lane of a computed vector (tinygrad's GEP)
    if len(u.src) != 2 or props(u.src[1]).shape: raise CompileError("compile.form", "a computed vector indexed by more than one scalar", u)
    r.declare(u, fill(r.T["vectors"][r.target]["lane"], {"v": r.ref(u.src[0]), "i": r.ref(u.src[1])}))


@INSTR.register("LOAD")
def _load(r, u: UOp, gates: list):
  src = u.src[0]
  g = u.src[2] if len(u.src) == 3 else None
  if g is not None and g.op == "CONST" and not isinstance(g.arg["value"], str) and not g.arg["value"]: r.declare(u, r.ref(u.src[1]))   # never read
  elif g is not None and not (g.op == "CONST" and g.arg["value"] is True): r.declare(u, r.read(src, r.ref(g), r.ref(u.src[1]), g, bool(props(u.src[1]).shape)))
  else: r.declare(u, r.ref(src) if src in r.names else r.read(src))


@INSTR.register("STORE")
def _store(r, u: UOp, gates: list): r.store(u, gates)


@INSTR.register("SPECIAL")
def _special(r, u: UOp, gates: list): r.special(u)


@INSTR.register("ATOMICADD")
def _atomic(r, u: UOp, gates: list): r.atomic(u)


@INSTR.register("CUSTOM")
def _custom(r, u: UOp, gates: list): r.custom(u)


@INSTR.register("STACK")
def _stack(r, u: UOp, gates: list):
  if len(props(u).shape) == 1 and all(not props(x).shape for x in u.src) and props(u).dtype != "index":
    V = r.T["vectors"][r.target]   # scalars joined into a vector (tinygrad's VECTORIZE): the vector literal
    r.declare(u, fill(V["literal"], {"V": r.type_of(u), "xs": ", ".join(r.ref(x) for x in u.src)}))
    return
  alu_or_refuse(r, u, gates)


def alu_or_refuse(r, u: UOp, gates: list):
  """An elementwise op by its render.yaml cases; an op with none cannot be rendered."""
  if u.op not in r.T["ops"]: raise CompileError("compile.unsupported", f"{u.op} cannot be rendered for {r.target}", u)
  if props(u).shape and (props(u).dtype == "index" or u in r.facts.lane_index): return   # vector lanes of an address: INDEX renders them
  r.alu(u)
