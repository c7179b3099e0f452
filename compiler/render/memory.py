"""Memory access: an element's address with its bounds guard, reads and stores (scalar,
vector, lane by lane), streaming stores and atomic adds.

An element read or write `p[i]` is emitted bare only when min_max proves every index in
[0, dim); otherwise it is guarded (decision index-oob: a read gives 0 or the LOAD's
alternative, a write is skipped), and the guard is evaluated before the address is
formed, so no out-of-bounds address is ever computed or dereferenced. An INDEX whose
lanes are consecutive is one vector load or store (render.yaml `vectors`).
"""
from __future__ import annotations
from typing import NamedTuple
from tinyspec.uop import UOp
from tinyspec.dtypes import dtype as _dt
from tinyspec.props import props
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.render.cases import fill, literal, value_type, storage_type, matches
from tinyspec.compiler.render.nodes import base_of, is_reg, is_local, param_of
from tinyspec.compiler.analysis.bounds import facts, interval
from tinyspec.compiler.analysis.symbolic import linear


class Address(NamedTuple):
  """An element's place: the pointer's name, the linear offset (lane 0's, for a vector), the
  in-bounds guard or None, the step between lanes, and the bound each lane is checked
  against on its own (a 1-d vector access not proved in bounds) or None."""
  ptr: str
  off: str
  guard: str | None
  lanes: int
  lane_bound: int | None


class MemoryAccess:
  """The memory half of a Renderer: it reads the kernel's facts (self.facts) and writes the
  text (emit, declare, names)."""

  def address(self, idx: UOp, gates: tuple = ()) -> Address:
    """The Address of INDEX(PARAM, i...); an index is guarded unless its interval,
    narrowed by what `gates` state, is in bounds."""
    known: dict = {}
    for g in gates:
      for x, (flo, fhi) in facts(g).items():
        plo, phi = known.get(x, (None, None))
        known[x] = (flo if plo is None else plo if flo is None else max(plo, flo), fhi if phi is None else phi if fhi is None else min(phi, fhi))
    p = idx.src[0]
    while p.op == "AFTER": p = p.src[0]
    if not ((p.op == "PARAM" and p in self.facts.params) or is_local(p) or p in self.facts.reg_arrays):
      raise CompileError("compile.form", f"INDEX into {p.op}: kernels index their PARAMs, LOCAL and REG buffers", idx)
    shape = props(p).shape
    ii = idx.src[1:]
    if len(ii) != len(shape): raise CompileError("compile.form", f"INDEX with {len(ii)} indices into a {len(shape)}-d PARAM reads a vector", idx)
    terms, guards, stride, lanes = [], [], 1, 0
    lane_bound = None
    for i, d in reversed(list(zip(ii, shape))):
      lo, hi = interval(i, known)
      if props(i).shape:      # a vector index: lane-0 offset here, the lanes' step counted
        base, coef = self.lane_split(i)
        if not (0 <= lo and hi < d):
          # a 1-d buffer: each lane is checked on its own (read() and store() go lane by lane); decision index-oob
          if len(shape) != 1: raise CompileError("compile.form", "a vector access into a multi-dimensional buffer that is not proved in bounds", idx)
          lane_bound = d
        lanes += coef * stride
        if base != "0": terms.append(base if stride == 1 else f"({base}) * {literal(stride, 'index', self.target)}")
        stride *= d
        continue
      r = self.ref(i)
      if props(i).dtype != "index": r = f"(({self.index_ctype}){r})"
      if not (0 <= lo and hi < d): guards.append(f"(0 <= {r} && {r} < {literal(d, 'index', self.target)})")
      if not (i.op == "CONST" and int(i.arg["value"]) == 0):
        terms.append(r if stride == 1 else f"{r} * {literal(stride, 'index', self.target)}")
      stride *= d
    off = " + ".join(reversed(terms)) or "0"
    return Address(self.names[p], off, " && ".join(reversed(guards)) or None, lanes, lane_bound)

  def lane_split(self, i: UOp):
    """A vector index as (its lane-0 value as source text, the step between lanes)."""
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
    ptr, off, guard, step, lane_bound = self.address(u, (gate_node,) if gate_node is not None else ())
    if props(u).shape:
      k = props(u).shape[0]
      if gate or guard or step != 1 or lane_bound is not None:   # lane by lane, each guarded
        lanes = []
        for j in range(k):
          o = f"({off} + {j * step})"
          inside = " && ".join(x for x in (guard, f"(0 <= {o} && {o} < {literal(lane_bound, 'index', self.target)})" if lane_bound is not None else None) if x)
          val = f"{ptr}[{o}]" if base_of(u.src[0]) in self.facts.reg_arrays else self.conv(dt, "load", f"{ptr}[{o}]")
          z = fill(self.T["vectors"][self.target]["lane"], {"v": zero, "i": str(j)}) if alt is not None and alt_vector else zero
          lanes.append(self._gated(val, gate, inside, z, alt, dt))
        return fill(self.T["vectors"][self.target]["literal"], {"V": self.vtype(dt, k), "xs": ", ".join(lanes)})
      return fill(self.T["vectors"][self.target]["load"], {"T": value_type(dt, self.target), "k": k, "p": f"{ptr} + {off}"})
    val = f"{ptr}[{off}]" if base_of(u.src[0]) in self.facts.reg_arrays else self.conv(dt, "load", f"{ptr}[{off}]")
    return self._gated(val, gate, guard, zero, alt, dt)

  def _gated(self, val: str, gate: str | None, inside: str | None, zero: str, alt: str | None, dt: str) -> str:
    """A read under its gate and its in-range guard: the gate picks the alternative; an
    index out of range where the gate holds reads 0 (decision index-oob), not the alternative."""
    self.gated_loads |= bool(gate or inside)   # (C: render.yaml targets.c.gated_loads)
    if gate and inside and alt is not None:
      return f"({gate} ? ({inside} ? {val} : {literal(False if _dt(dt).cls == 'bool' else 0, dt, self.target)}) : {zero})"
    cond = " && ".join(x for x in (gate, inside) if x)
    return f"({cond} ? {val} : {zero})" if cond else val


  def store(self, u: UOp, gates: list):
    dst, val = u.src[0], u.src[1]
    gate = u.src[2] if len(u.src) == 3 else None
    known = tuple(gates) + ((gate,) if gate is not None else ())
    if gate is not None and gates and gates[-1] is gate: gate = None   # inside IF(gate) already
    if gate is not None and gate.op == "CONST" and gate.arg["value"] is True: gate = None
    base = dst
    while base.op == "AFTER": base = base.src[0]
    v = self.ref(val)
    if is_reg(base):
      line = f"{self.names[base]} = {v};"
      self.emit(line if gate is None else f"if ({self.ref(gate)}) {line}")
      return
    dt = props(val).dtype
    if base.op == "PARAM":
      line = f"{self.names[base]}[0] = {self.conv(dt, 'store', v)};"
      self.emit(line if gate is None else f"if ({self.ref(gate)}) {line}")
      return
    if base.op != "INDEX": raise CompileError("compile.form", f"STORE into {base.op}", u)
    ptr, off, guard, step, lane_bound = self.address(base, known)
    cond = " && ".join(x for x in ((self.ref(gate) if gate is not None else None), guard) if x)
    if props(base).shape:
      k = props(base).shape[0]
      if cond or step != 1 or lane_bound is not None:   # lane by lane, each guarded
        for j in range(k):
          o = f"({off} + {j * step})"
          c = " && ".join(x for x in (cond, f"(0 <= {o} && {o} < {literal(lane_bound, 'index', self.target)})" if lane_bound is not None else None) if x)
          lane = fill(self.T["vectors"][self.target]["lane"], {"v": v, "i": str(j)}) if props(val).shape else v
          line = f"{ptr}[{o}] = {self.conv(dt, 'store', lane)};"
          self.emit(f"if ({c}) {line}" if c else line)
        return
      if not props(val).shape: v = self.vliteral_of(val, k)
      how = "store"
      if param_of(base) in self.facts.streamed:
        how, self.did_stream = "stream", True
        for h in self.T["streaming"][self.target].get("uses", ()): self.use_helper(h, {})
        if not v.isidentifier(): v = self.declare_value(val, v, k)   # the helper takes its address
      self.emit(fill(self.T["vectors"][self.target][how], {"T": value_type(dt, self.target), "k": k, "p": f"{ptr} + {off}", "v": v}))
      return
    line = f"{ptr}[{off}] = {v if base_of(base.src[0]) in self.facts.reg_arrays else self.conv(dt, 'store', v)};"
    self.emit(f"if ({cond}) {line}" if cond else line)

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
    case = next((c for c in self.T["atomic"][self.target] if matches(c.get("class"), dt)), None)
    if case is None: raise CompileError("compile.unsupported", f"no atomic add for {dt} on {self.target}", u)
    ptr, off, guard, _, _ = self.address(dst)
    v = self.ref(val)
    old = case.get("load_bits") or self.conv(dt, "load", "o")
    add = f"({old} + {v})"
    rnd = self.T["dtypes"].get(dt, {}).get("round")
    if rnd: add = f"{rnd}({add})"
    f = {"p": f"{ptr}[{off}]", "v": v, "ST": storage_type(dt, self.target), "add": add, "store": self.conv(dt, "store", add)}
    for e in case.get("exts", ()): self.exts[e] = None
    code = fill(case["code"], f)
    self.emit(f"if ({guard}) {code}" if guard else code)

