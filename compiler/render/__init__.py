"""Stage 8, render: a linearized kernel becomes C or OpenCL C source.

Everything op-specific comes from spec/render.yaml: per-op cases (`ops`), per-dtype
value/storage types and conversions (`dtypes`), helper functions (`helpers`), and the
targets' preludes. This module walks the LINEAR list once, names every value (`v3`,
`r0`, `acc1`, `p2`), formats constants itself, and fills the templates. Nothing from the
graph is pasted into the source except numbers formatted here and names generated here.

Memory safety: an element read or write `p[i]` is emitted bare only when min_max proves
every index in [0, dim); otherwise it is guarded (decision index-oob: a read gives 0 or
the LOAD's alternative, a write is skipped), and the guard is evaluated before the
address is formed, so no out-of-bounds address is ever computed or dereferenced.

Vectors: a (k,)-shaped value (expand's UPCAST lanes) is a C vector-extension or OpenCL
vector variable; an INDEX whose lanes are consecutive is one vector load or store
(render.yaml `vectors`). Pointers are `restrict` when the pipeline says no two PARAMs
share memory (C compilers then vectorize loops without aliasing checks).

Parallel axes: on OpenCL the leading GLOBAL/THREAD/LOCAL ranges that hold every store,
and the GROUP_REDUCE ranges right inside them, are work-item ids (`work_items`); sibling
GROUP_REDUCE ranges (and a fused row kernel's output lane) share one id, a narrower one
running on the items below its bound (`_lanes`). On C the
top-level THREAD or GROUP_REDUCE loop runs in slices on threads (phase 0) and whatever
follows it -- a group reduction's combine -- once afterwards (phase 1; `thread_axis`);
LOCAL buffers are scratch the runtime passes.
"""
from __future__ import annotations
import math
import re
from dataclasses import dataclass, field
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.props import props, CompileError
from tinyspec.compiler.tables import render_tables
from tinyspec.compiler.analysis.contract import cannot_overflow

TARGETS = ("c", "opencl")
_FIELD = re.compile(r"\{([A-Za-z_]+)\}")


def fill(template: str, fields: dict) -> str:
  """Replace the {NAME} fields a template uses (C braces and unknown names stay as they are)."""
  return _FIELD.sub(lambda m: str(fields[m.group(1)]) if m.group(1) in fields else m.group(0), template)
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")


# ------------------------------------------------------------------ types and literals
def value_type(dt: str, target: str) -> str:
  d = render_tables()["dtypes"].get(dt, {})
  if "value" in d: return d["value"][target]
  return _dt(dt).c if target == "c" else _dt(dt).cl


def storage_type(dt: str, target: str) -> str:
  d = render_tables()["dtypes"].get(dt, {})
  if "storage" in d: return d["storage"][target]
  return _dt(dt).c if target == "c" else _dt(dt).cl


def _utype(bits: int) -> str: return f"uint{bits}_t"


def literal(value, dt: str, target: str) -> str:
  """A constant of dtype dt as source text (exact: floats round-trip, wide ints suffixed)."""
  d = _dt(dt)
  if d.cls == "bool": return "true" if value else "false"
  if d.cls == "float":
    v = float(value) if not isinstance(value, str) else float(value)
    # NAN/INFINITY are float constants in OpenCL C: a double one is cast (exact for inf/nan)
    cast = "(double)" if value_type(dt, target) == "double" else ""
    if math.isnan(v): return f"({cast}NAN)" if cast else "NAN"
    if math.isinf(v): return (f"({cast}INFINITY)" if v > 0 else f"(-{cast}INFINITY)") if cast else ("INFINITY" if v > 0 else "(-INFINITY)")
    text = repr(v)
    if "e" not in text and "." not in text and "inf" not in text: text += ".0"
    if value_type(dt, target) == "float": text += "f"
    return f"({text})" if text.startswith("-") else text
  v = int(value)
  if not d.min <= v <= d.max: raise CompileError("compile.form", f"the literal {v} is not a value of {dt}")   # C would truncate it
  suffixes = render_tables()["targets"][target]["literal_suffix"]
  # a literal has its dtype's C type: a bare 0 is an int, and `0 >> 32` on it is undefined
  # even where the dtype is 64 bits wide (narrower dtypes promote to int like their values)
  if -2**31 < v < 2**31 and dt not in suffixes: return f"({v})" if v < 0 else str(v)
  suffix = suffixes.get(dt, "LL" if target == "c" else "L")
  if v == -2**63: return f"(-9223372036854775807{suffix} - 1)"
  if d.cls == "uint": suffix = suffix if suffix.startswith("U") else "U" + suffix
  return f"({v}{suffix})" if v < 0 else f"{v}{suffix}"


# ------------------------------------------------------------------ choosing a case
def _exact_iv(u: UOp):
  """The exact interval of an integer ADD/SUB/MUL/NEG/MULACC from its sources'."""
  iv = [props(s).min_max for s in u.src]
  if any(i is None for i in iv): return None
  if u.op == "ADD": return (iv[0][0] + iv[1][0], iv[0][1] + iv[1][1])
  if u.op == "SUB": return (iv[0][0] - iv[1][1], iv[0][1] - iv[1][0])
  if u.op == "NEG": return (-iv[0][1], -iv[0][0])
  if u.op == "MUL":
    c = [a * b for a in iv[0] for b in iv[1]]
    return (min(c), max(c))
  return None


def _pred_exact(u):
  iv = _exact_iv(u)
  d = _dt(props(u).dtype)
  return iv is not None and d.min <= iv[0] and iv[1] <= d.max


def _pred_div_plain(u):
  (alo, _), (blo, _) = props(u.src[0]).min_max, props(u.src[1]).min_max
  return alo >= 0 and blo >= 1


def _pred_shl_plain(u):
  blo, bhi = props(u.src[1]).min_max
  return 0 <= blo and bhi < _dt(props(u).dtype).bits


def _pred_shift_plain(u):
  return _pred_shl_plain(u) and (_dt(props(u).dtype).cls == "uint" or props(u.src[0]).min_max[0] >= 0)


PREDICATES = {"exact": _pred_exact, "div_plain": _pred_div_plain, "shl_plain": _pred_shl_plain, "shift_plain": _pred_shift_plain}


def _matches(sel, dt: str) -> bool:
  return sel is None or dt in sel or _dt(dt).cls in sel


def select_case(u: UOp, target: str, kind: str | None = None):
  """The render.yaml case for node u on target (and a device of that kind), or None."""
  if u.op not in render_tables()["ops"]: return None
  out = props(u).dtype
  src = props(u.src[0]).dtype if u.src else out
  for case in _dtype_cases(u.op, out, src, target, kind):
    if "if" in case and not PREDICATES[case["if"]](u): continue
    return case
  return None


_CASES: dict = {}


def _dtype_cases(op: str, out, src, target: str, kind: str | None = None) -> list:
  """The cases of op whose target, device kind and dtype conditions hold (the `if`
  predicates are the node's own business). kind None: any device kind."""
  key = (op, out, src, target, kind)
  r = _CASES.get(key)
  if r is None:
    r = _CASES[key] = [c for c in render_tables()["ops"][op] if c.get("target", target) == target
                       and (kind is None or kind in c.get("kinds", (kind,)))
                       and _matches(c.get("class"), src if c.get("on") == "src" else out)
                       and _matches(c.get("from"), src) and _matches(c.get("to"), out)]
  return r


# ------------------------------------------------------------------ the renderer
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


def assemble(kernels: list, target: str) -> str:
  """One translation unit holding every kernel: the target's prelude once, each helper
  once, then the kernel functions (their names are unique within a program)."""
  T = render_tables()["targets"][target]
  exts = dict.fromkeys(e for k in kernels for e in k.exts)
  pre = "".join(f"#pragma OPENCL EXTENSION {e} : enable\n" for e in exts)
  if target == "opencl" and any(k.fp64 for k in kernels): pre += T["prelude_fp64"]
  helpers = dict.fromkeys(h for k in kernels for h in k.helpers)
  return pre + T["prelude"] + "".join(helpers) + "".join(k.body for k in kernels)


def launch_size(entry, vals) -> int:
  """An entry of global_size/local_size/thread, with PARAM values filled in."""
  if isinstance(entry, list):
    n = 1
    for e in entry: n *= launch_size(e, vals)
    return n
  return vals[entry[1]] if isinstance(entry, tuple) else entry


class Renderer:
  def __init__(self, target: str, allow_untrusted: bool = False, noalias: bool = False, kind: str | None = None, contract: bool = False,
               stream_bytes: int | None = None):
    if target not in TARGETS: raise CompileError("compile.unsupported", f"unknown target {target!r}")
    self.target = target
    self.contract = contract    # every REG accumulator is a REDUCE's: render.yaml `contract` applies
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
    self.noalias = noalias      # no two PARAMs share memory: C pointers are `restrict`
    self.stream_bytes = stream_bytes   # outputs this big, never read by the kernel, get streaming stores
    self.streamed: set = set()         # ... those PARAMs
    self.did_stream = False
    self.gated_loads = False           # C: some read is under a condition (render.yaml targets.c.gated_loads)
    self._fields: dict = {}

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
    if u.op == "PARAM" and len(u.src) != 3 and u in self.params: return self.read(u)   # a ()-shaped buffer used as a value
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
         "U": _utype(64 if bits_on > 32 else 32), "UT": _utype(max(8, _dt(out).bits)) if out != "void" else "",
         "t": out, "s": src, "W": _dt(on).bits}
    dd = _dt(out)
    if dd.cls in ("int", "uint", "index"):
      f["MIN"], f["MAX"] = literal(dd.min, out, self.target), literal(dd.max, out, self.target)
    svt = value_type(src, self.target)
    f["fs"] = ("f" if svt == "float" else "") if self.target == "c" else ""
    if dd.cls == "float": f["fs"] = ("f" if value_type(out, self.target) == "float" else "") if self.target == "c" else ""
    f["R"] = self.T["dtypes"].get(out, {}).get("round", "")
    return f

  def conv(self, dt: str, kind: str, x: str, fields: dict | None = None) -> str:
    """A dtype's load/store/to_bits/from_bits conversion of expression x."""
    d = self.T["dtypes"].get(dt) or (self.T["dtypes"]["integer"] if _dt(dt).cls in ("int", "uint", "index") else {})
    tmpl = d.get(kind)
    for h in d.get("uses", ()): self.use_helper(h, {})
    if tmpl is None: return x
    f = dict(fields or {})
    f.update({"x": x, "T": value_type(dt, self.target), "UT": _utype(max(8, _dt(dt).bits))})
    return fill(tmpl, f)

  def declare(self, u: UOp, expr: str) -> str:
    name = f"v{self.nvar}"
    self.nvar += 1
    self.emit(f"{self.type_of(u)} {name} = {expr};")
    self.names[u] = name
    return name

  # -- memory access
  def address(self, idx: UOp, gates: tuple = ()):
    """(pointer name, linear offset expression, guard or None) of INDEX(PARAM, i...); an
    index is guarded unless its interval, narrowed by what `gates` state, is in bounds."""
    from tinyspec.compiler.analysis.bounds import facts, interval
    known: dict = {}
    for g in gates:
      for x, (flo, fhi) in facts(g).items():
        plo, phi = known.get(x, (None, None))
        known[x] = (flo if plo is None else plo if flo is None else max(plo, flo), fhi if phi is None else phi if fhi is None else min(phi, fhi))
    p = idx.src[0]
    while p.op == "AFTER": p = p.src[0]
    if not ((p.op == "PARAM" and p in self.params) or _is_local(p) or p in self.reg_arrays):
      raise CompileError("compile.form", f"INDEX into {p.op}: kernels index their PARAMs, LOCAL and REG buffers", idx)
    shape = props(p).shape
    ii = idx.src[1:]
    if len(ii) != len(shape): raise CompileError("compile.form", f"INDEX with {len(ii)} indices into a {len(shape)}-d PARAM reads a vector", idx)
    terms, guards, stride, lanes = [], [], 1, 0
    self.lane_bound = None
    for i, d in reversed(list(zip(ii, shape))):
      lo, hi = interval(i, known)
      if props(i).shape:      # a vector index: lane-0 offset here, the lanes' step counted
        base, coef = self.lane_split(i)
        if not (0 <= lo and hi < d):
          # a 1-d buffer: each lane is checked on its own (read() and store() go lane by lane); decision index-oob
          if len(shape) != 1: raise CompileError("compile.form", "a vector access into a multi-dimensional buffer that is not proved in bounds", idx)
          self.lane_bound = d
        lanes += coef * stride
        if base != "0": terms.append(base if stride == 1 else f"({base}) * {literal(stride, 'index', self.target)}")
        stride *= d
        continue
      r = self.ref(i)
      if props(i).dtype != "index": r = f"((int64_t){r})" if self.target == "c" else f"((long){r})"
      if not (0 <= lo and hi < d): guards.append(f"(0 <= {r} && {r} < {literal(d, 'index', self.target)})")
      if not (i.op == "CONST" and int(i.arg["value"]) == 0):
        terms.append(r if stride == 1 else f"{r} * {literal(stride, 'index', self.target)}")
      stride *= d
    off = " + ".join(reversed(terms)) or "0"
    self.last_lanes = lanes
    return self.names[p], off, (" && ".join(reversed(guards)) or None)

  def lane_split(self, i: UOp):
    """A vector index as (its lane-0 value as source text, the step between lanes)."""
    from tinyspec.compiler.analysis.symbolic import linear
    lf = linear(i, 64)
    if lf is None: raise CompileError("compile.form", "a vector index that is not linear", i)
    parts, coef, c = [], 0, lf[1]
    for t, k in lf[0].items():
      if t.op == "VCONST":     # lanes v0, v0+s, v0+2s...: v0 joins the offset, s the step
        vals = [int(v) for v in t.arg["values"]]
        step = vals[1] - vals[0] if len(vals) > 1 else 0
        if any(v != vals[0] + j * step for j, v in enumerate(vals)): raise CompileError("compile.form", "vector lanes that are not evenly spaced", i)
        coef += k * step
        c += k * vals[0]
        continue
      parts.append(self.ref(t) if k == 1 else f"{self.ref(t)} * {literal(k, 'index', self.target)}")
    if c: parts.append(literal(c, "index", self.target))
    return (" + ".join(parts) or "0"), coef

  def read(self, u: UOp, gate: str | None = None, alt: str | None = None, gate_node: UOp | None = None, alt_vector: bool = False) -> str:
    """Expression reading storage u (INDEX of a PARAM, or a ()-shaped PARAM); alt_vector:
    the alternative value is a vector (one lane per lane read)."""
    dt = props(u).dtype
    zero = alt if alt is not None else literal(False if _dt(dt).cls == "bool" else 0, dt, self.target)
    if u.op == "PARAM":
      val = self.conv(dt, "load", f"{self.names[u]}[0]")
      self.gated_loads |= bool(gate)
      return f"({gate} ? {val} : {zero})" if gate else val
    ptr, off, guard = self.address(u, (gate_node,) if gate_node is not None else ())
    if props(u).shape:
      k = props(u).shape[0]
      if gate or guard or self.last_lanes != 1 or self.lane_bound is not None:   # lane by lane, each guarded
        lanes = []
        for j in range(k):
          o = f"({off} + {j * self.last_lanes})"
          inside = " && ".join(x for x in (guard, f"(0 <= {o} && {o} < {literal(self.lane_bound, 'index', self.target)})" if self.lane_bound is not None else None) if x)
          val = f"{ptr}[{o}]" if _base(u.src[0]) in self.reg_arrays else self.conv(dt, "load", f"{ptr}[{o}]")
          z = fill(self.T["vectors"][self.target]["lane"], {"v": zero, "i": str(j)}) if alt is not None and alt_vector else zero
          lanes.append(self._gated(val, gate, inside, z, alt, dt))
        return fill(self.T["vectors"][self.target]["literal"], {"V": self.vtype(dt, k), "xs": ", ".join(lanes)})
      return fill(self.T["vectors"][self.target]["load"], {"T": value_type(dt, self.target), "k": k, "p": f"{ptr} + {off}"})
    val = f"{ptr}[{off}]" if _base(u.src[0]) in self.reg_arrays else self.conv(dt, "load", f"{ptr}[{off}]")
    return self._gated(val, gate, guard, zero, alt, dt)

  def _gated(self, val: str, gate: str | None, inside: str | None, zero: str, alt: str | None, dt: str) -> str:
    """A read under its gate and its in-range guard: the gate picks the alternative; an
    index out of range where the gate holds reads 0 (decision index-oob), not the alternative."""
    self.gated_loads |= bool(gate or inside)   # (C: render.yaml targets.c.gated_loads)
    if gate and inside and alt is not None:
      return f"({gate} ? ({inside} ? {val} : {literal(False if _dt(dt).cls == 'bool' else 0, dt, self.target)}) : {zero})"
    cond = " && ".join(x for x in (gate, inside) if x)
    return f"({cond} ? {val} : {zero})" if cond else val

  # -- the walk
  def render(self, linear: UOp, name: str) -> KernelSource:
    if not _NAME.match(name) or name in ("kernel", "main"): name = "user_kernel"
    instrs = list(linear.src)
    self.params = {u: u.arg["slot"] for u in instrs if u.op == "PARAM"}
    self._acc_updates: dict = {}
    for u in instrs:
      if u.op == "STORE" and _is_reg(u.src[0]) and u.src[1].op not in ("CONST", "VCONST"):   # updates, not initial values
        self._acc_updates.setdefault(_base(u.src[0]), []).append(u.src[1])
    # vector integer values used only as the index of an INDEX (and to compute such): lanes of an address
    self.lane_index = set()
    users: dict = {}
    for u in instrs:
      for k, x in enumerate(u.src): users.setdefault(x, []).append((u, k))
    for u in reversed(instrs):
      if props(u).shape and _dt(props(u).dtype).cls in ("int", "uint", "index") and users.get(u) and \
         all((c.op == "INDEX" and k >= 1) or c in self.lane_index for c, k in users[u]): self.lane_index.add(u)
    # a REG buffer read or written through INDEX (tinygrad's accumulator BUFFER (n,) REG) is a private array
    self.reg_arrays = {_base(u.src[0]) for u in instrs if u.op == "INDEX" and _is_reg(u.src[0])}
    self._acc_update_of = {v: b for b, vs in self._acc_updates.items() for v in vs}
    self.trips = 1     # iterations of all the kernel's loops: more than any accumulator's updates (render.yaml `contract`)
    for u in instrs:
      if u.op == "RANGE": self.trips *= max(1, int(props(u.src[0]).min_max[1]))
    slots = sorted(self.params.values())
    if slots != list(range(len(slots))): raise CompileError("compile.form", f"kernel PARAM slots {slots} are not 0..n-1")
    writes = set()
    for u in instrs:
      if u.op in ("STORE", "ATOMICADD") and (t := _param_of(u.src[0])).op == "PARAM": writes.add(t.arg["slot"])
    by_slot = {s: u for u, s in self.params.items()}
    self.streamed = self.stream_outputs(instrs, writes)
    params = []
    for s in range(len(slots)):
      p = by_slot[s]
      self.names[p] = f"p{s}"
      if len(p.src) == 3: params.append(("scalar", props(p).dtype))
      else: params.append(("buf", props(p).dtype, _numel(props(p).shape), s in writes))
    if any(props(u).dtype == "float64" for u in instrs if isinstance(props(u).dtype, str)): self.fp64 = True
    specials = [u for u in instrs if u.op == "SPECIAL"]
    if self.target == "c" and any(u.op == "BARRIER" for u in instrs) and any(u.arg["name"][0] == "l" for u in specials):
      # C runs the work items of a SPECIAL as a loop, one after another: the workgroup never meets at the barrier
      raise CompileError("compile.unsupported", "a BARRIER among local work items (lidx SPECIALs): C runs them one after another; the opencl target runs workgroups")
    self.ids: dict[UOp, str] = {}      # OpenCL: range -> the work-item builtin call it is
    self.guarded: set = set()          # OpenCL: lanes narrower than their work-group (run under if (id < bound))
    self.thread, self.tail = None, False
    gsize, lsize = [], None
    if specials: gsize, lsize = self.specials(specials)
    elif self.target == "opencl": gsize, lsize = self.work_items(instrs)
    else: self.thread, self.tail = self.thread_axis(instrs)
    self.locals = [u for u in instrs if _is_local(u) and u.op == "BUFFER"]
    scratch = []
    for k, b in enumerate(self.locals):
      self.names[b] = f"l{b.arg['slot']}"
      n = _numel(props(b).shape)
      if self.target == "opencl": self.emit(f"__local {storage_type(props(b).dtype, 'opencl')} {self.names[b]}[{max(n, 1)}];")
      else: scratch.append(max(n, 1) * _dt(props(b).dtype).itemsize)
    gate_stack: list[UOp] = []
    for u in instrs:
      self.instr(u, gate_stack)
    while self.depth > 1:   # the C loops of SPECIALs around the whole body
      self.depth -= 1; self.emit("}")
    self.stream_fence()
    body = "\n".join(self.lines)
    fn = self.signature(name, params) + " {\n" + self.unpack(params) + body + "\n}\n"
    ks = KernelSource(name, self.target, "", params, gsize, self.bound(self.thread) if self.thread is not None else None, lsize,
                      fn, tuple(self.helpers), tuple(self.exts), self.fp64, self.tail, scratch,
                      {s: tuple(props(by_slot[s]).min_max) for s, p in enumerate(params) if p[0] == "scalar"})
    ks.work_ids = {v: k for k, v in self.ids.items()}
    for k, v in self.ids.items(): ks.work_lanes.setdefault(v, []).append(k)
    if self.target == "opencl":
      for u in specials: ks.work_ids[{"g": "get_group_id", "l": "get_local_id", "t": "get_global_id"}[u.arg["name"][0]] + f"({u.arg['name'][-1]})"] = u
    ks.source = assemble([ks], self.target)
    return ks

  def specials(self, specials):
    """Name every SPECIAL; on C open a loop per SPECIAL around the body, on OpenCL
    work out the launch size. Returns (global_size, local_size)."""
    dims: dict[int, dict] = {}
    for k, u in enumerate(specials):
      self.names[u] = f"s{k}"
      kind, d = u.arg["name"][0], int(u.arg["name"][-1])
      b = self.bound(u)
      if kind in dims.setdefault(d, {}): raise CompileError("compile.form", f"two SPECIALs of kind {kind} on dimension {d}", u)
      dims[d][kind] = b
      if self.target == "c":
        it = "int64_t"
        self.emit(f"for ({it} s{k} = 0; s{k} < {self.ref(u.src[0])}; s{k}++) {{")
        self.depth += 1
    if self.target == "c": return [], None
    gsize, lsize = [], []
    for d in range(max(dims) + 1):
      k = dims.get(d, {})
      if "t" in k and ("g" in k or "l" in k): raise CompileError("compile.unsupported", f"tidx{d} together with gidx{d}/lidx{d}")
      if "t" in k: gsize.append(k["t"]); lsize.append(1)
      else: gsize.append([k.get("g", 1), k.get("l", 1)]); lsize.append(k.get("l", 1))
    # always launch with this local size: a gidx is get_group_id, so without lidx each
    # work-group must be one work item (letting the device pick would merge gidx values)
    return gsize, lsize

  def bound(self, r: UOp):
    b = r.src[0]
    if b.op == "CONST": return int(b.arg["value"])
    if b.op == "PARAM" and b in self.params and len(b.src) == 3: return ("param", self.params[b])
    raise CompileError("compile.form", "a parallel axis needs a constant or PARAM bound", r)

  def work_items(self, instrs):
    """OpenCL: the leading ranges of the outermost nest that are GLOBAL, THREAD or LOCAL
    and hold every store become work-item ids, with the GROUP_REDUCE ranges opened right
    inside them (their ENDs come before a BARRIER: every work item reaches it). Without
    LOCAL/GROUP_REDUCE axes: up to 3 get_global_id dimensions, innermost first, the
    device picks the workgroups. With them: GLOBAL/THREAD axis d is get_group_id(d) and
    LOCAL/GROUP_REDUCE axis d get_local_id(d). Returns (global_size, local_size)."""
    prefix = self._parallel_prefix(instrs, ("GLOBAL", "THREAD", "LOCAL"))
    at, groups = self._lanes(instrs, prefix)
    if groups and at < len(prefix):   # a fused row kernel: the output axis's lane shares the reduces' id
      lane = prefix[at]
      if lane.arg.get("type") == "LOCAL" and isinstance(self.bound(lane), int) and self.bound(lane) <= self.bound(groups[0]):
        groups.append(lane)
        if self.bound(lane) < self.bound(groups[0]): self.guarded.add(lane)
      prefix = prefix[:at]
    glob = [r for r in prefix if r.arg.get("type") != "LOCAL"]
    loc = [r for r in prefix if r.arg.get("type") == "LOCAL"] + groups[:1]
    if not loc or len(glob) > 3 or len(loc) > 3:
      ids = prefix[-3:]
      for d, r in enumerate(reversed(ids)): self.ids[r] = f"get_global_id({d})"
      return [self.bound(r) for r in reversed(ids)], None
    glob, loc = glob[::-1], loc[::-1]            # dimension 0 is the innermost
    gsize, lsize = [], []
    for d in range(max(len(glob), len(loc))):
      g = glob[d] if d < len(glob) else None
      l = loc[d] if d < len(loc) else None
      if g is not None: self.ids[g] = f"get_group_id({d})"
      if l is not None:
        for x in (groups if groups and l is groups[0] else [l]): self.ids[x] = f"get_local_id({d})"
      gb, lb = (self.bound(g) if g is not None else 1), (self.bound(l) if l is not None else 1)
      gsize.append([gb, lb]); lsize.append(lb)
    return gsize, lsize

  def _lanes(self, instrs, prefix: list):
    """(depth d, ranges): the GROUP_REDUCE ranges opened directly inside prefix[:d], at the
    smallest such d. They are siblings (each closed before the next opens, a BARRIER
    between them), so they share one work-item id: the work-group runs them one after the
    other, every item taking its lane in each (a fused row kernel: compiler/passes/heuristics.py
    _gpu_rows). The widest sets the work-group's size; a narrower one (a step of a tree
    combine, compiler/passes/expand.py) runs on the items below its bound (`guarded`)."""
    open_, found = [], []
    for u in instrs:
      if u.op == "RANGE":
        d = len(open_)
        if u.arg.get("type") == "GROUP_REDUCE" and self._bound_ok(u) and d <= len(prefix) and open_ == prefix[:d]: found.append((d, u))
        open_.append(u)
      elif u.op == "END": open_.pop()
    if not found: return len(prefix), []
    at = min(d for d, _ in found)
    lanes = [u for d, u in found if d == at and isinstance(self.bound(u), int)] or [next(u for d, u in found if d == at)]
    width = max(lanes, key=lambda u: self.bound(u) if isinstance(self.bound(u), int) else 0)
    self.guarded |= {u for u in lanes if u is not width and self.bound(u) != self.bound(width)}
    return at, [width] + [u for u in lanes if u is not width]

  def _parallel_prefix(self, instrs, kinds) -> list:
    """The leading ranges of the outermost nest with a type in `kinds`, when every store
    to memory (not a REG accumulator, not a LOCAL buffer) is inside all of them."""
    stores_depth, open_ = [], []
    for u in instrs:
      if u.op == "RANGE": open_.append(u)
      elif u.op == "END": open_.pop()
      elif u.op in ("STORE", "ATOMICADD") and not _is_reg(u.src[0]) and not _is_local_access(u.src[0]): stores_depth.append(list(open_))
    cands, depth = [], 0
    for u in instrs:
      if u.op == "RANGE":
        if depth == len(cands) and u.arg.get("type") in kinds and self._bound_ok(u): cands.append(u)
        depth += 1
      elif u.op == "END": depth -= 1
    if not cands or any(st[:len(cands)] != cands for st in stores_depth): return []
    return cands

  def thread_axis(self, instrs):
    """C: the top-level THREAD or GROUP_REDUCE loop whose slices [tlo, thi) run on
    threads (phase 0), and whether code follows it (the tail: phase 1, run once after
    every slice). It qualifies when nothing before it loops or writes memory or reads a
    buffer the kernel writes, every store is inside it or in the tail, and the tail
    reads no accumulator the loop updates (LOCAL buffers are the loop's way out)."""
    depth, start = 0, None
    for k, u in enumerate(instrs):
      if u.op == "RANGE":
        if depth == 0 and u.arg.get("type") in ("THREAD", "GROUP_REDUCE") and self._bound_ok(u): start = k
        break
    if start is None: return None, False
    r = instrs[start]
    stop = next(k for k, u in enumerate(instrs) if u.op == "END" and u.src[1] is r)
    written = set()
    for u in instrs:
      if u.op in ("STORE", "ATOMICADD"):
        t = u.src[0]
        while t.op in ("INDEX", "AFTER"): t = t.src[0]
        written.add(t)
    for u in instrs[:start]:
      if u.op in ("STORE", "ATOMICADD") and not _is_reg(u.src[0]): return None, False
      if u.op == "INDEX" and u.src[0] in written and self._value_uses.get(u): return None, False   # a read of what the loop may write
      if u.op == "PARAM" and u in written and self._value_uses.get(u): return None, False
    loop_regs = {_base(u.src[0]) for u in instrs[start:stop] if u.op == "STORE" and _is_reg(u.src[0])}
    tail = [u for u in instrs[stop + 1:] if u.op not in ("SINK", "GROUP", "CONST", "VCONST", "PARAM", "BARRIER")]
    for u in tail:
      if any(s.op == "AFTER" and _base(s) in loop_regs for s in u.src): return None, False
    return r, bool(tail)

  def _bound_ok(self, r: UOp) -> bool:
    b = r.src[0]
    return b.op == "CONST" or (b.op == "PARAM" and len(b.src) == 3)

  def signature(self, name: str, params) -> str:
    if self.target == "c":
      pre = self.T["targets"]["c"].get("gated_loads", "") if self.gated_loads else ""
      return f"{pre}void {name}(void** bufs, const int64_t* vals, int64_t tlo, int64_t thi, int64_t phase)"
    args = []
    for s, p in enumerate(params):
      if p[0] == "scalar": args.append(f"{value_type(p[1], 'opencl')} p{s}")
      else: args.append(f"__global {'' if p[3] else 'const '}{storage_type(p[1], 'opencl')}* {'restrict ' if self.noalias else ''}p{s}")
    return f"__kernel void {name}(" + ", ".join(args) + ")"

  def unpack(self, params) -> str:
    if self.target != "c": return ""
    out = []
    for s, p in enumerate(params):
      if p[0] == "scalar": out.append(f"  {value_type(p[1], 'c')} p{s} = ({value_type(p[1], 'c')})vals[{s}];")
      else:
        t = storage_type(p[1], "c")
        q = "" if p[3] else "const "
        out.append(f"  {q}{t}* {'restrict ' if self.noalias else ''}p{s} = ({q}{t}*)bufs[{s}];")
    for k, b in enumerate(self.locals):   # LOCAL buffers: scratch the runtime passes after the PARAMs
      t = storage_type(props(b).dtype, "c")
      out.append(f"  {t}* {self.names[b]} = ({t}*)bufs[{len(params) + k}];")
    out.append("  (void)bufs; (void)vals; (void)tlo; (void)thi; (void)phase;")
    return "\n".join(out) + "\n"

  def instr(self, u: UOp, gates: list):
    op = u.op
    if op in ("PARAM", "CONST", "VCONST", "SINK", "GROUP"): return
    if op == "RANGE":
      r = f"r{u.arg['id']}"
      self.names[u] = r
      bound = self.ref(u.src[0])
      if u in self.ids:
        self.emit(f"long {r} = (long){self.ids[u]};")
        if u in self.guarded:   # a lane narrower than the work-group: the items above it skip the body
          self.emit(f"if ({r} < {bound}) {{")
          self.depth += 1
        return
      it = "int64_t" if self.target == "c" else "long"
      start, stop = ("tlo", "thi") if u is self.thread else ("0", bound)
      if u is self.thread and self.tail:   # phase 0: this slice of the loop; phase 1: what follows it
        self.emit("if (phase == 0) {")
        self.depth += 1
      self.emit(f"for ({it} {r} = {start}; {r} < {stop}; {r}++) {{")
      self.depth += 1
      return
    if op == "END":
      if u.src[1] in self.guarded and u.src[1] in self.ids:
        self.depth -= 1
        self.emit("}")
      if u.src[1] in self.ids: return
      self.depth -= 1
      self.emit("}")
      if u.src[1] is self.thread and self.tail:
        self.stream_fence()
        self.emit("return;")
        self.depth -= 1
        self.emit("}")
      return
    if op == "BARRIER":   # OpenCL: the workgroup's; C: the phase boundary (or nothing: the loop ran in order)
      if self.target == "opencl": self.emit("barrier(CLK_LOCAL_MEM_FENCE);")
      return
    if op == "IF":
      self.emit(f"if ({self.ref(u.src[0])}) {{")
      self.depth += 1
      gates.append(u.src[0])
      return
    if op == "ENDIF":
      self.depth -= 1
      self.emit("}")
      gates.pop()
      return
    if op == "BUFFER":
      if _is_local(u): return      # declared at the top (OpenCL __local) or passed as scratch (C)
      if props(u).addrspace != "REG": raise CompileError("compile.unsupported", f"{props(u).addrspace} buffers are not rendered inside kernels", u)
      name = f"acc{u.arg['slot']}"
      self.names[u] = name
      if u in self.reg_arrays:   # zeroed, as REG storage starts (decision store-order)
        self.emit(f"{value_type(props(u).dtype, self.target)} {name}[{max(_numel(props(u).shape), 1)}] = {{0}};")
      elif self.unsigned_acc(u): self.emit(f"{_utype(max(8, _dt(props(u).dtype).bits))} {name};")
      else: self.emit(f"{self.type_of(u)} {name};")
      return
    if op == "AFTER":
      base = u.src[0]
      while base.op == "AFTER": base = base.src[0]
      s = u.src[0]
      if not self._used_as_value(u) or base in self.reg_arrays: self.names[u] = self.names.get(base, "")   # (a REG array is read through INDEX)
      elif _is_reg(base): self.declare(u, self.names[base])
      elif s.op == "INDEX": self.declare(u, self.read(s))
      else: self.names[u] = self.ref(s)
      return
    if op == "INDEX":
      b = _base(u.src[0])
      if (u.src[0].op == "PARAM" or _is_local(b) or b in self.reg_arrays) and self._used_as_value(u): self.declare(u, self.read(u))
      elif not (b.op in ("PARAM", "BUFFER", "BUFFER_VIEW") or _is_local(b)):   # a lane of a computed vector (tinygrad's GEP)
        if len(u.src) != 2 or props(u.src[1]).shape: raise CompileError("compile.form", "a computed vector indexed by more than one scalar", u)
        self.declare(u, fill(self.T["vectors"][self.target]["lane"], {"v": self.ref(u.src[0]), "i": self.ref(u.src[1])}))
      return
    if op == "LOAD":
      src = u.src[0]
      g = u.src[2] if len(u.src) == 3 else None
      if g is not None and g.op == "CONST" and not isinstance(g.arg["value"], str) and not g.arg["value"]: self.declare(u, self.ref(u.src[1]))   # never read
      elif g is not None and not (g.op == "CONST" and g.arg["value"] is True): self.declare(u, self.read(src, self.ref(g), self.ref(u.src[1]), g, bool(props(u.src[1]).shape)))
      else: self.declare(u, self.ref(src) if src in self.names else self.read(src))
      return
    if op == "STORE":
      self.store(u, gates)
      return
    if op == "SPECIAL":
      if self.target == "opencl":
        fn = self.T["special"]["opencl"][u.arg["name"][0]]
        self.emit(f"long {self.names[u]} = (long){fn}({int(u.arg['name'][-1])});")
      return
    if op == "ATOMICADD":
      self.atomic(u)
      return
    if op == "CUSTOM":
      self.custom(u)
      return
    if op == "STACK" and len(props(u).shape) == 1 and all(not props(x).shape for x in u.src) and props(u).dtype != "index":
      V = self.T["vectors"][self.target]   # scalars joined into a vector (tinygrad's VECTORIZE): the vector literal
      self.declare(u, fill(V["literal"], {"V": self.type_of(u), "xs": ", ".join(self.ref(x) for x in u.src)}))
      return
    if op in self.T["ops"]:
      if props(u).shape and (props(u).dtype == "index" or u in self.lane_index): return   # vector lanes of an address: INDEX renders them
      self.alu(u)
      return
    raise CompileError("compile.unsupported", f"{op} cannot be rendered for {self.target}", u)

  def unsigned_acc(self, buf: UOp) -> bool:
    """Is this signed-integer accumulator held in its unsigned type? When every update
    computes in the unsigned type ({U} rules: wrapping ADD, MUL), so that the loop's
    chain has no sign change (render.yaml targets.c.unsigned_accumulators)."""
    if not self.T["targets"][self.target].get("unsigned_accumulators"): return False
    if _dt(props(buf).dtype).cls not in ("int", "index") or props(buf).shape: return False
    ups = self._acc_updates.get(buf, [])
    return bool(ups) and all((c := select_case(v, self.target, self.kind)) is not None and "{U}" in c["code"] for v in ups)

  def _used_as_value(self, u: UOp) -> bool:
    return self._value_uses.get(u, False)

  def store(self, u: UOp, gates: list):
    dst, val = u.src[0], u.src[1]
    gate = u.src[2] if len(u.src) == 3 else None
    known = tuple(gates) + ((gate,) if gate is not None else ())
    if gate is not None and gates and gates[-1] is gate: gate = None   # inside IF(gate) already
    if gate is not None and gate.op == "CONST" and gate.arg["value"] is True: gate = None
    base = dst
    while base.op == "AFTER": base = base.src[0]
    v = self.ref(val)
    if _is_reg(base):
      line = f"{self.names[base]} = {v};"
      self.emit(line if gate is None else f"if ({self.ref(gate)}) {line}")
      return
    dt = props(val).dtype
    if base.op == "PARAM":
      line = f"{self.names[base]}[0] = {self.conv(dt, 'store', v)};"
      self.emit(line if gate is None else f"if ({self.ref(gate)}) {line}")
      return
    if base.op != "INDEX": raise CompileError("compile.form", f"STORE into {base.op}", u)
    ptr, off, guard = self.address(base, known)
    cond = " && ".join(x for x in ((self.ref(gate) if gate is not None else None), guard) if x)
    if props(base).shape:
      k = props(base).shape[0]
      if cond or self.last_lanes != 1 or self.lane_bound is not None:   # lane by lane, each guarded
        for j in range(k):
          o = f"({off} + {j * self.last_lanes})"
          c = " && ".join(x for x in (cond, f"(0 <= {o} && {o} < {literal(self.lane_bound, 'index', self.target)})" if self.lane_bound is not None else None) if x)
          lane = fill(self.T["vectors"][self.target]["lane"], {"v": v, "i": str(j)}) if props(val).shape else v
          line = f"{ptr}[{o}] = {self.conv(dt, 'store', lane)};"
          self.emit(f"if ({c}) {line}" if c else line)
        return
      if not props(val).shape: v = self.vliteral_of(val, k)
      how = "store"
      if _param_of(base) in self.streamed:
        how, self.did_stream = "stream", True
        for h in self.T["streaming"][self.target].get("uses", ()): self.use_helper(h, {})
        if not v.isidentifier(): v = self.declare_value(val, v, k)   # the helper takes its address
      self.emit(fill(self.T["vectors"][self.target][how], {"T": value_type(dt, self.target), "k": k, "p": f"{ptr} + {off}", "v": v}))
      return
    line = f"{ptr}[{off}] = {v if _base(base.src[0]) in self.reg_arrays else self.conv(dt, 'store', v)};"
    self.emit(f"if ({cond}) {line}" if cond else line)

  # -- streaming stores (render.yaml `streaming`)
  def stream_outputs(self, instrs: list, writes: set) -> set:
    """The PARAMs this kernel writes with streaming stores: written, never read here,
    at least stream_bytes big."""
    S = self.T.get("streaming", {}).get(self.target)
    if S is None or self.stream_bytes is None: return set()
    read = {_param_of(u.src[0]) for u in instrs if u.op == "LOAD"} | {_param_of(u) for u in instrs if u.op == "INDEX" and self._value_uses.get(u)}
    out = set()
    for p, slot in self.params.items():
      if slot in writes and p not in read and len(p.src) != 3 and _numel(props(p).shape) * _dt(props(p).dtype).itemsize >= self.stream_bytes: out.add(p)
    return out

  def stream_fence(self):
    """After the last streaming store of a call: they are weakly ordered until fenced."""
    if self.did_stream: self.emit(self.T["streaming"][self.target]["fence"])

  def declare_value(self, val: UOp, text: str, k: int) -> str:
    """A vector expression held in a named variable (so that its address can be taken)."""
    name = f"s{self.nvar}"
    self.nvar += 1
    self.emit(f"{self.vtype(props(val).dtype, k)} {name} = {text};")
    return name

  def vliteral_of(self, val: UOp, k: int) -> str:
    """A scalar value in every lane of a k-vector."""
    x = self.ref(val)
    V = self.T["vectors"][self.target]
    return fill(V["literal"], {"V": self.vtype(props(val).dtype, k), "xs": ", ".join([x] * k)})

  def atomic(self, u: UOp):
    dst, val = u.src
    while dst.op == "AFTER": dst = dst.src[0]
    if dst.op != "INDEX": raise CompileError("compile.form", "ATOMICADD into something other than an element", u)
    dt = props(val).dtype
    case = next((c for c in self.T["atomic"][self.target] if _matches(c.get("class"), dt)), None)
    if case is None: raise CompileError("compile.unsupported", f"no atomic add for {dt} on {self.target}", u)
    ptr, off, guard = self.address(dst)
    v = self.ref(val)
    old = case.get("load_bits") or self.conv(dt, "load", "o")
    add = f"({old} + {v})"
    rnd = self.T["dtypes"].get(dt, {}).get("round")
    if rnd: add = f"{rnd}({add})"
    f = {"p": f"{ptr}[{off}]", "v": v, "ST": storage_type(dt, self.target), "add": add, "store": self.conv(dt, "store", add)}
    for e in case.get("exts", ()): self.exts[e] = None
    code = fill(case["code"], f)
    self.emit(f"if ({guard}) {code}" if guard else code)

  def custom(self, u: UOp):
    """CUSTOM pastes its own text: only with allow_untrusted (the user's explicit opt-in)."""
    if not self.allow_untrusted: raise CompileError("compile.untrusted", "CUSTOM is untrusted: refused without --allow-untrusted", u)
    text = re.sub(r"\{(\d+)\}", lambda m: self.ref(u.src[int(m.group(1))]) if int(m.group(1)) < len(u.src) else m.group(0), u.arg["fmt"])
    if props(u).dtype == "void": self.emit(f"{text};")
    else: self.declare(u, f"({text})")

  def contraction(self, u: UOp):
    """(acc read, [terms]) when u is a REDUCE(ADD) accumulator update acc + t1 + t2 + ...
    (an ADD tree: UNROLL sums its lanes before adding them to the accumulator) holding a
    product, which render.yaml `contract` lets accumulate as fused multiply-adds in turn
    (only in kernels made from tensor graphs: self.contract), else None."""
    C = self.T.get("contract") or {}
    if not self.contract or u.op not in C.get("reduce", ()) or props(u).dtype not in C.get("dtypes", ()) or u not in self._acc_update_of: return None
    acc = self._acc_update_of[u]
    terms, stack = [], [u]
    while stack:
      x = stack.pop()
      if x.op == u.op and props(x).shape == props(u).shape and props(x).dtype == props(u).dtype: stack.extend(reversed(x.src))
      else: terms.append(x)
    cur = [t for t in terms if _reads_acc(t, acc)]
    if len(cur) != 1 or not any(t.op == "MUL" for t in terms): return None
    rest = [t for t in terms if t is not cur[0]]
    if not cannot_overflow(rest, props(u).dtype, self.trips): return None
    return cur[0], rest

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


def _base(u: UOp) -> UOp:
  while u.op == "AFTER": u = u.src[0]
  return u


def _is_reg(u: UOp) -> bool:
  u = _base(u)
  return u.op == "BUFFER" and props(u).addrspace == "REG"


def _reads_acc(u: UOp, acc: UOp) -> bool:
  """Is u the running value of REG accumulator acc (a read of it)?"""
  if _base(u) is acc: return True
  return u.op in ("LOAD", "INDEX") and bool(u.src) and _base(u.src[0]) is acc


def _is_local(u: UOp) -> bool:
  return u.op == "BUFFER" and props(u).addrspace == "LOCAL"


def _is_local_access(u: UOp) -> bool:
  """An element of a LOCAL buffer (INDEX of one, through AFTERs)."""
  u = _base(u)
  return u.op == "INDEX" and _is_local(_base(u.src[0]))


def _param_of(u: UOp) -> UOp:
  """The PARAM (or other base) an address is into: through INDEX and AFTER."""
  while u.op in ("INDEX", "AFTER"): u = u.src[0]
  return u


def _numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


def render(linear: UOp, name: str, target: str, allow_untrusted: bool = False, noalias: bool = False, kind: str | None = None,
           contract: bool = False, stream_bytes: int | None = None) -> KernelSource:
  """contract: the kernel's REG accumulators are all REDUCEs' (compiled from a tensor
  graph): their ADD updates of a product may fuse (render.yaml `contract`).
  stream_bytes: outputs at least this big that the kernel never reads are written with
  streaming stores (render.yaml `streaming`; None: never)."""
  r = Renderer(target, allow_untrusted, noalias, kind, contract, stream_bytes)
  # an INDEX is a read where something other than a STORE target or a LOAD uses it
  uses: dict[UOp, bool] = {}
  for u in linear.src:
    for k, s in enumerate(u.src):
      if s.op not in ("INDEX", "AFTER"): continue
      as_addr = (u.op in ("STORE", "ATOMICADD") and k == 0) or (u.op == "LOAD" and k == 0 and s.op == "INDEX") or u.op in ("IF", "ENDIF") or (u.op == "AFTER" and k == 0)
      uses[s] = uses.get(s, False) or not as_addr
  r._value_uses = uses
  return r.render(linear, name)
