"""A kernel-level graph (a SINK over PARAMs) as a tinygrad kernel of UOps (RANGE, INDEX,
STORE, END, REDUCE ...), run with `Tensor.custom_kernel`: the `tinygrad` backend's kernel
level (interop/tinygrad_backend.py).

One builder per op in KERNEL_OPS (every elementwise and decomposed op through tinygrad's op
of the same meaning, interop/tinygrad_names.apply_alu); a builder asks for its sources
(`yield i`) and returns the UOp it made (tinyspec/walk.py drives them).
"""
from __future__ import annotations
import numpy as np
from tinyspec.dispatch import Registry, input_name
from tinyspec.walk import drive
from tinyspec.interop.tinygrad_names import Unexpressed, _backend_table, apply_alu, tg_const, tg_dtype
from tinyspec.interop.tinygrad_device import Refused, _device_map, from_tensor, on_device, to_tensor
from tinyspec.tables import tables

KERNEL_OPS = Registry("tinygrad kernel builder")


class KernelBuilder:
  """The kernel's PARAM k is the k-th tensor tinygrad binds (input param{k}); `device` is
  the backend's tinygrad device; root: the kernel's SINK (default: the graph's last root)."""

  def __init__(self, device: str, graph, res, inputs, root: int | None = None):
    self.device, self.g, self.res, self.inputs = device, graph, res, dict(inputs)
    self.views, self.T = res.views, tables()
    self.root = graph.root_indices[-1] if root is None else root
    self.dev = _device_map(device)

  def params(self) -> dict:
    """slot -> PARAM node index, for the PARAMs the kernel uses."""
    out = {}
    stack, seen = [self.root], set()
    while stack:
      i = stack.pop()
      if i in seen: continue
      seen.add(i)
      n = self.g.nodes[i]
      if n.op == "PARAM" and len(n.src) == 1: out.setdefault(n.arg["slot"], i)
      stack.extend(n.src)
    return out

  def _number_params(self) -> list[tuple[int, str, str, tuple]]:
    """[(slot, input name, dtype, shape)] of the PARAMs used, in slot order. tinygrad binds
    one tensor per PARAM it uses, so the used slots are numbered 0..k-1 for tinygrad (a slot
    the graph skips binds nothing)."""
    params = self.params()
    self.slot_index = {slot: k for k, slot in enumerate(sorted(params))}
    out = []
    for slot in sorted(params):
      n, v = self.g.nodes[params[slot]], self.views[params[slot]]
      out.append((slot, input_name(n.op, n.arg), v.dtype, tuple(v.shape)))
    return out

  def uops(self):
    """(the kernel's SINK of UOps over placeholders, [(input name, dtype, shape) per PARAM
    slot]): what outputs() gives Tensor.custom_kernel (a repro writes it with pyrender)."""
    from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
    slots = [(name, dt, sh) for _, name, dt, sh in self._number_params()]
    self.placeholders = [UOp.placeholder((int(np.prod(sh)),), tg_dtype(dt), k) for k, (_, dt, sh) in enumerate(slots)]
    return drive(self.root, self._build, {}), slots

  def outputs(self) -> dict:
    """Run the kernel on the inputs: {input name: contents after} for every PARAM stored to."""
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    tensors = []
    for slot, name, dt, shape in self._number_params():
      size = int(np.prod(shape))
      t = (to_tensor(self.inputs[name], dt, (size,), self.dev("CPU")) if name in self.inputs
           else Tensor.zeros(size, dtype=tg_dtype(dt), device=self.dev("CPU")).contiguous())
      tensors.append((slot, name, dt, shape, t))
    outs = self.run_on([t for *_, t in tensors])
    stored = self.stored_slots()
    return {name: from_tensor(o, dt, self.device).reshape(shape) for (slot, name, dt, shape, _), o in zip(tensors, outs) if slot in stored}

  def stored_slots(self) -> set:
    """The PARAM slots some STORE writes."""
    out = set()
    for n in self.g.nodes:
      if n.op == "STORE":
        j = n.src[0]
        while self.g.nodes[j].op in self.T.through_ops: j = self.g.nodes[j].src[0]
        if self.g.nodes[j].op == "PARAM": out.add(self.g.nodes[j].arg["slot"])
    return out

  def run_on(self, tensors: list) -> list:
    """The kernel run by tinygrad on `tensors` (one per PARAM used, in slot order): the
    tensors after it."""
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    if not tensors: raise Refused("a kernel without PARAMs", "backend.unsupported")
    def fxn(*placeholders):
      self.placeholders = placeholders
      return drive(self.root, self._build, {})
    outs = Tensor.custom_kernel(*[on_device(t, self.dev("CPU")).contiguous() for t in tensors], fxn=fxn)
    Tensor.realize(*outs)
    return outs

  def _build(self, i):
    n = self.g.nodes[i]
    return KERNEL_OPS.get(n.op, KernelBuilder.unsupported)(self, i, n)

  def unsupported(self, i, n):
    raise Unexpressed(f"node {i} ({n.op}): not built in a kernel by the tinygrad backend")

  def _sources(self, srcs):
    out = []
    for s in srcs: out.append((yield s))
    return out

  # ---- sources
  @KERNEL_OPS.register("PARAM")
  def param(self, i, n):
    slot = n.arg["slot"]
    return self.placeholders[getattr(self, "slot_index", {}).get(slot, slot)]

  @KERNEL_OPS.register("CONST")
  def const(self, i, n):
    from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
    return UOp.const(tg_const(n.arg["value"], n.arg["dtype"]), tg_dtype(n.arg["dtype"], kernel=True))

  # ---- loops and work items
  @KERNEL_OPS.register("RANGE")
  def loop(self, i, n):
    from tinygrad.uop.ops import UOp, AxisType  # noqa: PLC0415 (tinygrad, an optional dependency)
    bound = yield n.src[0]
    ty = _backend_table()["axis_types"].get(n.arg.get("type", "LOOP"), n.arg.get("type", "LOOP"))
    return UOp.range(bound, n.arg["id"], AxisType[ty])

  @KERNEL_OPS.register("SPECIAL")
  def special(self, i, n):
    from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
    bound = yield n.src[0]
    return UOp.special(bound, n.arg["name"])

  @KERNEL_OPS.register("END")
  def end(self, i, n):
    body = yield n.src[0]
    rngs = yield from self._sources(n.src[1:])
    return body.end(*rngs)

  @KERNEL_OPS.register("REDUCE")
  def reduce(self, i, n):
    from tinygrad.uop.ops import UOp, Ops  # noqa: PLC0415 (tinygrad, an optional dependency)
    x = yield n.src[0]
    rngs = yield from self._sources(n.src[1:])
    return UOp(Ops.REDUCE, x.dtype, (x, *rngs), (Ops[n.arg["op"]], 0))

  # ---- memory
  def _flat_index(self, n):
    """INDEX(p, i, j, ...) on a PARAM: (the row-major flat index, the condition that every
    index is in range or None where tinygrad's own vmin/vmax prove it). Decision index-oob:
    an access out of range reads zero and writes nothing, which is tinygrad's masked
    access `INDEX(p, i.valid(ok))`; tinygrad leaves an ungated one undefined (its PYTHON
    device raises IndexError)."""
    idx = yield from self._sources(n.src[1:])
    shape = self.views[n.src[0]].shape
    ok = None
    for x, d in zip(idx, shape):
      if isinstance(x.vmin, int) and isinstance(x.vmax, int) and 0 <= x.vmin and x.vmax < int(d): continue
      c = (x < int(d)) & (x > -1)
      ok = c if ok is None else ok & c
    flat = idx[0]
    for k, x in enumerate(idx[1:], 1): flat = flat * int(shape[k]) + x
    return flat, ok

  def _access(self, idx_node, gate=None):
    """The masked INDEX of an access through idx_node, gated by `gate` too."""
    buf = yield idx_node.src[0]
    flat, ok = yield from self._flat_index(idx_node)
    cond = gate if ok is None else ok if gate is None else gate & ok
    return buf.index(flat if cond is None else flat.valid(cond))

  @KERNEL_OPS.register("INDEX")
  def index(self, i, n):
    return (yield from self._access(n))

  @KERNEL_OPS.register("LOAD")
  def load(self, i, n):
    """LOAD(INDEX(p, i), alt, gate): tinygrad's masked read INDEX(p, i.valid(gate)), which
    reads zero where the gate is false; alt elsewhere than zero is a WHERE after it."""
    if len(n.src) == 1: return (yield n.src[0])
    idx_node = self.g.nodes[n.src[0]]
    if idx_node.op != "INDEX": raise Unexpressed(f"node {i} (LOAD): a gated load of {idx_node.op}")
    alt = yield n.src[1]
    gate = yield n.src[2]
    x = yield from self._access(idx_node, gate)
    return gate.where(x, alt)

  @KERNEL_OPS.register("STORE")
  def store(self, i, n):
    idx_node = self.g.nodes[n.src[0]]
    val = yield n.src[1]
    if len(n.src) == 3:
      if idx_node.op != "INDEX": raise Unexpressed(f"node {i} (STORE): a gated store to {idx_node.op}")
      gate = yield n.src[2]
      return (yield from self._access(idx_node, gate)).store(val)
    target = yield n.src[0]
    return target.store(val)

  # ---- grouping
  @KERNEL_OPS.register("GROUP")
  def group(self, i, n):
    from tinygrad.uop.ops import UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
    return UOp.group(*(yield from self._sources(n.src)))

  @KERNEL_OPS.register("SINK")
  def sink(self, i, n):
    from tinygrad.uop.ops import UOp, KernelInfo  # noqa: PLC0415 (tinygrad, an optional dependency)
    srcs = yield from self._sources(n.src)
    return UOp.sink(*srcs, arg=KernelInfo(name=(n.arg or {}).get("name") or "tinyspec"))

  # ---- elementwise
  @KERNEL_OPS.register(category="decomposed")
  @KERNEL_OPS.register(category="elementwise")
  def alu(self, i, n):
    return apply_alu(n.op, n.arg, (yield from self._sources(n.src)), kernel=True)
