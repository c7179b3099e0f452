"""The renderer both targets share: it walks the LINEAR list once, names every value
(`v3`, `r0`, `acc1`, `p2`), and fills render.yaml's templates; each instruction goes to
its handler (compiler/render/instr.py). A target (compiler/render/c.py, opencl.py) adds
attributes (its index type, its barrier) and the parts of a kernel that are its own:
signature, argument unpacking, launch layout, LOCAL buffers.
What a renderer writes as it goes is only its text (lines, names, helpers, extensions).
What it knows about the kernel (`facts`, compiler/render/facts.py) and how the kernel runs
(`launch`, compiler/render/launch.py) are computed once before the first line and only
read; what to fuse and what to stream the decide stage has tagged (compiler/passes/decide.py)."""
from __future__ import annotations
import re
from dataclasses import dataclass, field, replace
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.analysis import contract as _contract
from tinyspec.compiler.render.cases import fill, value_type, literal, select_case, utype
from tinyspec.compiler.render.nodes import reads_acc, numel, decision, update_terms
from tinyspec.compiler.render.launch import Launch, LaunchLayout
from tinyspec.compiler.render.facts import KernelFacts, kernel_facts
from tinyspec.compiler.render.memory import MemoryAccess
from tinyspec.compiler.render.instr import INSTR, alu_or_refuse


_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}(_fused)?$")   # (a guarded kernel's fused variant: its name + _fused)


@dataclass
class KernelSource:
  name: str
  target: str
  source: str
  params: list            # per slot: ("buf", dtype, numel, writes) or ("scalar", dtype)
  global_size: list = field(default_factory=list)   # per OpenCL dim: int, ("param", slot), or a list of those (a product)
  thread: object = None   # C: the bound of the axis whose slices run on threads (int or ("param", slot)), or None
  local_size: list | None = None   # per OpenCL dim, when the kernel has workgroups (lidx SPECIALs, LOCAL/GROUP_REDUCE axes)
  body: str = ""          # the kernel function alone
  helpers: tuple = ()     # helper function texts it calls
  exts: tuple = ()        # OpenCL extensions it needs
  fp64: bool = False      # it uses double (OpenCL: cl_khr_fp64)
  tail: bool = False      # C: code after the threaded loop, run once after every slice (phase 1)
  scratch: list = field(default_factory=list)   # C: bytes of each LOCAL buffer, passed after the PARAMs
  bounds: dict = field(default_factory=dict)    # scalar (symbolic size) slot -> (min, max) the kernel was proved under
  work_ids: dict = field(default_factory=dict)  # OpenCL: builtin ("get_local_id(0)"...) -> the RANGE/SPECIAL it is (compiler/analysis/gpucheck.py)
  work_lanes: dict = field(default_factory=dict)  # OpenCL: builtin -> every RANGE it is (a fused row kernel's sibling lanes)
  guard: object = None    # a contract.Guard: the fused variant runs where it holds at launch
  fused_body: str = ""    # ... that variant's function (named guard.fused)

  def renamed(self, name: str) -> "KernelSource":
    """The same kernel under another function name (its fused variant: name + _fused)."""
    ks = replace(self, name=name, body=self.body.replace(f" {self.name}(", f" {name}(", 1))
    if self.guard is not None:
      ks.guard = _contract.Guard(f"{name}_fused", self.guard.updates)
      ks.fused_body = self.fused_body.replace(f" {self.guard.fused}(", f" {ks.guard.fused}(", 1)
    return ks


def assemble(kernels: list, target: str) -> str:
  """One translation unit holding every kernel: the target's prelude once, each helper
  once, then the kernel functions (their names are unique within a program)."""
  T = render_tables()["targets"][target]
  exts = dict.fromkeys(e for k in kernels for e in k.exts)
  pre = "".join(f"#pragma OPENCL EXTENSION {e} : enable\n" for e in exts)
  if any(k.fp64 for k in kernels): pre += T.get("prelude_fp64", "")
  helpers = dict.fromkeys(h for k in kernels for h in k.helpers)
  return pre + T["prelude"] + "".join(helpers) + "".join(k.body + k.fused_body for k in kernels)


def launch_size(entry, vals) -> int:
  """An entry of global_size/local_size/thread, with PARAM values filled in."""
  if isinstance(entry, list):
    n = 1
    for e in entry: n *= launch_size(e, vals)
    return n
  return vals[entry[1]] if isinstance(entry, tuple) else entry


class Renderer(LaunchLayout, MemoryAccess):
  target: str              # render.yaml's name for the target
  index_ctype: str         # the C type of an index value (loop counters, widened indices)
  float_suffix_fields = False   # {fs}: "f" where the value type is float (C's float math functions)
  barrier: str | None = None    # a work-group barrier's statement (None: BARRIER renders as nothing)
  facts: KernelFacts       # what the kernel is (render/facts.py): read-only while it is printed
  launch: Launch           # how it runs (render/launch.py): computed once, read-only

  def __init__(self, allow_untrusted: bool = False, noalias: bool = False, kind: str | None = None, fuse_guarded: bool = False):
    self.fuse_guarded = fuse_guarded   # the fused variant: also fuse the updates tagged `guarded` (compiler/passes/decide.py)
    self.kind = kind            # the device kind (cpu, gpu) the rules are chosen for
    self.T = render_tables()
    self.helpers: dict[str, None] = {}
    self.names: dict[UOp, str] = {}
    self.lines: list[str] = []
    self.depth = 1
    self.nvar = 0
    self.fp64 = False
    self.exts: dict[str, None] = {}
    self.allow_untrusted = allow_untrusted
    self.noalias = noalias      # no two PARAMs share memory: pointers are `restrict`
    self.did_stream = False
    self.gated_loads = False           # C: some read is under a condition (render.yaml targets.c.gated_loads)
    self._fields: dict = {}

  # -- what a target provides
  def layout(self, instrs: list, specials: list) -> Launch:
    """How the kernel runs (compiler/render/launch.py Launch): computed, nothing written."""
    raise NotImplementedError

  def begin(self, specials: list) -> None:
    """The text that opens the body (C: a loop per SPECIAL)."""

  def local_buffer(self, b: UOp, n: int, scratch: list) -> None:
    """Declare LOCAL buffer b of n elements (or add its bytes to the runtime's scratch)."""
    raise NotImplementedError

  def signature(self, name: str, params) -> str: raise NotImplementedError

  def unpack(self, params) -> str: return ""

  def special(self, u: UOp) -> None: pass

  def check(self, instrs: list, specials: list) -> None: pass

  def special_work_ids(self, specials: list) -> dict: return {}

  # -- vectors (render.yaml `vectors`)
  def vtype(self, dt: str, k: int) -> str:
    """The target's type of a k-lane vector of dt (C: declared once per program)."""
    V = self.T["vectors"][self.target]
    f = {"T": value_type(dt, self.target), "k": k, "B": k * _dt(dt).itemsize}
    if "typedef" in V:
      self.helpers[fill(V["typedef"], f)] = None
      self.helpers[fill(V["helper"], f)] = None
    return fill(V["type"], f)

  def type_of(self, u: UOp) -> str:
    shape = props(u).shape
    return self.vtype(props(u).dtype, shape[0]) if shape else value_type(props(u).dtype, self.target)

  def vliteral(self, dt: str, values) -> str:
    V = self.T["vectors"][self.target]
    return fill(V["literal"], {"V": self.vtype(dt, len(values)), "xs": ", ".join(literal(v, dt, self.target) for v in values)})

  # -- names and values
  def ref(self, u: UOp) -> str:
    if u.op == "CONST": return literal(u.arg["value"], props(u).dtype, self.target)
    if u.op == "VCONST" and props(u).dtype != "index": return self.vliteral(props(u).dtype, u.arg["values"])
    if u.op == "PARAM" and len(u.src) != 3 and u in self.facts.params: return self.read(u)   # a ()-shaped buffer used as a value
    n = self.names.get(u)
    if n is None: raise CompileError("compile.form", f"{u.op} is used before it is computed", u)
    return n

  def emit(self, line: str): self.lines.append("  " * self.depth + line)

  def use_helper(self, name: str, fields: dict):
    text = fill(self.T["helpers"][name], fields)
    self.helpers[text] = None

  def fields(self, u: UOp, on_src: bool) -> dict:
    out = props(u).dtype
    src = props(u.src[0]).dtype if u.src else out
    key = (out, src, on_src)
    f = self._fields.get(key)
    if f is None: f = self._fields[key] = self._dtype_fields(out, src, on_src)
    return dict(f)

  def _dtype_fields(self, out, src, on_src: bool) -> dict:
    on = src if on_src else out
    bits_on = max(32, _dt(on).bits) if _dt(on).cls != "bool" else 32
    f = {"T": value_type(out, self.target) if out != "void" else "void", "S": value_type(src, self.target),
         "U": utype(64 if bits_on > 32 else 32), "UT": utype(max(8, _dt(out).bits)) if out != "void" else "",
         "t": out, "s": src, "W": _dt(on).bits}
    dd = _dt(out)
    if dd.is_int:
      f["MIN"], f["MAX"] = literal(dd.min, out, self.target), literal(dd.max, out, self.target)
    svt = value_type(src, self.target)
    f["fs"] = "f" if self.float_suffix_fields and svt == "float" else ""
    if dd.cls == "float": f["fs"] = "f" if self.float_suffix_fields and value_type(out, self.target) == "float" else ""
    f["R"] = self.T["dtypes"].get(out, {}).get("round", "")
    return f

  def conv(self, dt: str, kind: str, x: str, fields: dict | None = None) -> str:
    """A dtype's load/store/to_bits/from_bits conversion of expression x."""
    d = self.T["dtypes"].get(dt) or (self.T["dtypes"]["integer"] if _dt(dt).is_int else {})
    tmpl = d.get(kind)
    for h in d.get("uses", ()): self.use_helper(h, {})
    if tmpl is None: return x
    f = dict(fields or {})
    f.update({"x": x, "T": value_type(dt, self.target), "UT": utype(max(8, _dt(dt).bits))})
    return fill(tmpl, f)

  def declare(self, u: UOp, expr: str) -> str:
    name = f"v{self.nvar}"
    self.nvar += 1
    self.emit(f"{self.type_of(u)} {name} = {expr};")
    self.names[u] = name
    return name


  # -- the walk
  def render(self, linear: UOp, name: str) -> KernelSource:
    if not _NAME.match(name) or name in ("kernel", "main"): name = "user_kernel"
    self.facts = F = kernel_facts(linear)
    params = []
    for s, p in enumerate(F.by_slot):
      self.names[p] = f"p{s}"
      if len(p.src) == 3: params.append(("scalar", props(p).dtype))
      else: params.append(("buf", props(p).dtype, numel(props(p).shape), s in F.writes))
    if any(props(u).dtype == "float64" for u in F.instrs if isinstance(props(u).dtype, str)): self.fp64 = True
    self.check(list(F.instrs), list(F.specials))
    for k, u in enumerate(F.specials): self.names[u] = f"s{k}"
    self.launch = L = self.layout(list(F.instrs), list(F.specials))
    self.begin(list(F.specials))
    scratch: list = []
    for b in F.locals:
      self.names[b] = f"l{b.arg['slot']}"
      self.local_buffer(b, numel(props(b).shape), scratch)
    gate_stack: list[UOp] = []
    for u in F.instrs:
      self.instr(u, gate_stack)
    while self.depth > 1:   # the C loops of SPECIALs around the whole body
      self.depth -= 1; self.emit("}")
    self.stream_fence()
    body = "\n".join(self.lines)
    fn = self.signature(name, params) + " {\n" + self.unpack(params) + body + "\n}\n"
    ks = KernelSource(name, self.target, "", params, L.global_size, self.bound(L.thread) if L.thread is not None else None, L.local_size,
                      fn, tuple(self.helpers), tuple(self.exts), self.fp64, L.tail, scratch,
                      {s: tuple(props(F.by_slot[s]).min_max) for s, p in enumerate(params) if p[0] == "scalar"})
    ks.work_ids = {v: k for k, v in L.ids.items()}
    for k, v in L.ids.items(): ks.work_lanes.setdefault(v, []).append(k)
    ks.work_ids.update(self.special_work_ids(list(F.specials)))
    ks.source = assemble([ks], self.target)
    return ks

  def instr(self, u: UOp, gates: list):
    """Render one instruction through its handler (instr.py); other ops with render.yaml
    cases are elementwise (`alu`)."""
    INSTR.get(u.op, alu_or_refuse)(self, u, gates)

  def unsigned_acc(self, buf: UOp) -> bool:
    """Is this signed-integer accumulator held in its unsigned type? When every update
    computes in the unsigned type ({U} rules: wrapping ADD, MUL), so that the loop's
    chain has no sign change (render.yaml targets.c.unsigned_accumulators)."""
    if not self.T["targets"][self.target].get("unsigned_accumulators"): return False
    if _dt(props(buf).dtype).cls not in ("int", "index") or props(buf).shape: return False
    ups = self.facts.acc_updates.get(buf, ())
    return bool(ups) and all((c := select_case(v, self.target, self.kind)) is not None and "{U}" in c["code"] for v in ups)

  def custom(self, u: UOp):
    """CUSTOM pastes its own text: only with allow_untrusted (the user's explicit opt-in)."""
    if not self.allow_untrusted: raise CompileError("compile.untrusted", "CUSTOM is untrusted: refused without --allow-untrusted", u)
    text = re.sub(r"\{(\d+)\}", lambda m: self.ref(u.src[int(m.group(1))]) if int(m.group(1)) < len(u.src) else m.group(0), u.arg["fmt"])
    if props(u).dtype == "void": self.emit(f"{text};")
    else: self.declare(u, f"({text})")

  def contraction(self, u: UOp):
    """(acc read, [terms]) when the decide stage (compiler/passes/decide.py) tagged
    accumulator update u a fused one (render.yaml `contract`), or a guarded one and this is
    the kernel's fused variant; else None."""
    how = decision(u, "contract")
    if how is None or (how == "guarded" and not self.fuse_guarded) or u not in self.facts.acc_update_of: return None
    terms = update_terms(u)
    cur = [t for t in terms if reads_acc(t, self.facts.acc_update_of[u])]
    if len(cur) != 1: raise CompileError("compile.form", "a fused accumulator update that does not read its accumulator once", u)
    return cur[0], [t for t in terms if t is not cur[0]]

  def fused(self, u: UOp, parts) -> None:
    """acc = fma(a, b, acc) for each product term in turn (a plain add for other terms)."""
    C = self.T["contract"][self.target]
    shape = props(u).shape
    case = C["vector" if shape else "scalar"]
    dt = props(u).dtype
    f = {"T": value_type(dt, self.target), "t": dt, "k": shape[0] if shape else 1}
    if shape: f["V"] = self.vtype(dt, shape[0])
    if "fast" in C: f["FAST"], f["f"] = C["fast"][dt]
    for h in case.get("uses", ()): self.use_helper(h, f)
    def lanes(s): return self.ref(s) if props(s).shape == shape else self.vliteral_of(s, shape[0])
    cur, terms = parts
    expr = self.ref(cur)
    for t in terms:
      if t.op == "MUL": expr = fill(case["code"], {**f, "a": lanes(t.src[0]), "b": lanes(t.src[1]), "c": expr})
      else: expr = f"({expr} + {lanes(t)})"
    self.declare(u, expr)

  def alu(self, u: UOp):
    parts = self.contraction(u)
    if parts is not None: return self.fused(u, parts)
    case = select_case(u, self.target, self.kind)
    if case is None: raise CompileError("compile.unsupported", f"{u.op} has no {self.target} rule for {props(u).dtype}", u)
    if case.get("fp64"): self.fp64 = True
    f = self.fields(u, case.get("on") == "src")
    for k, s in zip("abc", u.src): f[k] = self.ref(s)
    if u.op == "BITCAST":
      sdt, ddt = props(u.src[0]).dtype, props(u).dtype
      f["from_bits"] = self.conv(ddt, "from_bits", self.conv(sdt, "to_bits", f["a"]))
    for h in case.get("uses", ()): self.use_helper(h, f)
    expr = fill(case["code"], f)
    out = props(u).dtype
    rnd = self.T["dtypes"].get(out, {}).get("round")
    if rnd and case.get("rounds", True) and _dt(out).cls == "float":
      for h in self.T["dtypes"][out].get("uses", ()): self.use_helper(h, {})
      expr = f"{rnd}({expr})"
    for h in self.T["dtypes"].get(out, {}).get("uses", ()): self.use_helper(h, {})
    for s in u.src:
      for h in self.T["dtypes"].get(props(s).dtype, {}).get("uses", ()): self.use_helper(h, {})
    self.declare(u, expr)

