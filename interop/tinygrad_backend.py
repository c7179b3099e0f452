"""The `tinygrad` conformance backend: a tinyspec graph built in tinygrad and realized.

    TinygradBackend().run(graph, {"buf0": x}) -> {"out0": ...}   # like refimpl.evaluate

A tensor-level graph is built through tinygrad's Tensor API, node by node: sources become
Tensors holding the inputs, movement ops the Tensor methods of the same name, elementwise
ops tinygrad's own op of the same meaning (`Tensor.alu`, the `backend` section of
interop/tinygrad_map.yaml), FUNCTION/CALL bodies are inlined with their PARAMs bound to the
arguments, and STORE/AFTER keep a version of each buffer (the reads a graph orders after a
STORE see it, decision store-order). A kernel-level graph (a SINK over PARAMs) becomes a
tinygrad kernel of UOps (RANGE, INDEX, STORE, END, REDUCE ...) run with
`Tensor.custom_kernel`. Graphs the validator rejects are refused with its rule id.

The device: TINYSPEC_TINYGRAD_DEVICE (CPU, PYTHON for tinygrad's emulator, CL for OpenCL:
PoCL here, through pyopencl's own libOpenCL); unset, CPU when `clang` is on PATH
(tinygrad's CPU device compiles with it, even to open), else PYTHON (a warning says so
once). The device is the backend's label: its expected failures are
conformance/manifests/tinygrad-<DEVICE>.yaml, each a tinygrad bug of docs/tinygrad-bugs.md.
The backend claims the portable profile (tinygrad's results are judged against the
results the decisions allow). Every tensor the backend makes names its device, and a
value of constants only (which tinygrad keeps deviceless and would realize on a
hard-coded "CPU") is realized on the backend's device, so a PYTHON run never opens
tinygrad's CPU device or runs clang. Results come back in the spec's dtypes.
"""
from __future__ import annotations
import os
import shutil
import numpy as np
from tinyspec.backends import Backend, Capabilities, Unavailable, describe_by_capabilities
from tinyspec.interop.walk import drive
from tinyspec.interop.tinygrad_names import _backend_table, tg_dtype, tg_op  # noqa: F401 (tg_dtype, tg_op: the backend's API)
from tinyspec.interop.tinygrad_device import (Refused, Unexpressed, _base, _device_context, _device_map,  # noqa: F401 (the
                                             have_clang, open_cl, tinygrad_device)  # backend's API: Refused, have_clang, open_cl)


def unsupported(device: str) -> dict:
  """op -> why, for the ops tinygrad's `device` cannot run from a graph (the map table's
  backend.unsupported: `all` and the device's own)."""
  u = _backend_table()["unsupported"]
  return {**u.get("all", {}), **u.get(_base(device), {})}


def _version() -> str:
  from importlib.metadata import version, PackageNotFoundError
  try: return version("tinygrad")
  except PackageNotFoundError: return "?"


class TinygradBackend(Backend):
  name = "tinygrad"

  def __init__(self, device: str | None = None):
    self.device = device or tinygrad_device()
    # tinygrad reads DEV when it is first imported (helpers.DEV); its Device.DEFAULT is
    # only a fallback here (every tensor names its device), and _device_context() keeps it
    # on this device when tinygrad was imported with another DEV.
    os.environ.setdefault("DEV", _base(self.device))

  def capabilities(self) -> Capabilities:
    import tinygrad  # noqa: F401  (no tinygrad: the backend is unavailable)
    from tinyspec.tables import tables
    from tinyspec.dtypes import DTYPES
    T, B = tables(), _backend_table()
    ops: dict[str, set] = {}
    for lv, spec in B["levels"].items():
      names = {n for n, o in T.ops.items() if o.category in spec.get("categories", ()) and lv in o.levels}
      names |= set(spec.get("ops", ()))
      names -= set(unsupported(self.device))
      for n in names: ops.setdefault(n, set()).add(lv)
    self.setup()
    dts = frozenset(n for n, d in DTYPES.items() if d.cls != "void")
    # tinygrad divides as seed 001's MUL(A, RECIP(B)) (mixin/elementwise.py div): its decompositions' bounds apply
    return Capabilities({k: frozenset(v) for k, v in ops.items()}, dts, tuple(B["devices"]), decomposed=True,
                        profile="portable", label=_base(self.device))

  def describe(self) -> dict:
    try: import tinygrad
    except ImportError as e: return {"status": "unavailable", "why": f"tinygrad is not installed ({e}): pip install 'tinyspec[tinygrad]'", "details": []}
    import shutil
    out = describe_by_capabilities(self)
    out["details"] = [f"tinygrad {_version()}, device {self.device} (TINYSPEC_TINYGRAD_DEVICE; "
                      f"expected failures: conformance/manifests/tinygrad-{_base(self.device)}.yaml)",
                      f"clang for its CPU device: {shutil.which('clang') or 'not installed (apt-get install clang)'}"]
    return out

  def setup(self) -> None:
    """Once: the device must work (CPU needs clang), and the dtypes of the table's
    `emulate` run through tinygrad's own emulation (EMULATED_DTYPES)."""
    if getattr(self, "_ready", False): return
    if _base(self.device) == "CPU" and not have_clang():
      raise Unavailable("tinygrad's CPU device needs clang (apt-get install clang), or set TINYSPEC_TINYGRAD_DEVICE=PYTHON [backend.unavailable]")
    if _base(self.device) == "CL": open_cl()
    from tinygrad.helpers import EMULATED_DTYPES
    want = [x for x in EMULATED_DTYPES.value.split(",") if x] + list(_backend_table()["emulate"])
    EMULATED_DTYPES.value = ",".join(dict.fromkeys(want))
    self._ready = True

  def triage(self, failure, out):
    """A fuzz finding sorted: a documented tinygrad bug, a limit of this adapter, or new (with
    a tinygrad-only repro.py written under out and checked to fail): interop/hunt.py."""
    from tinyspec.interop.hunt import triage
    return triage(failure, out, _base(self.device), self.kernel_uops)

  def campaign(self, minutes: float, devices, out, seed: int = 0, log=print):
    """Hunt on each device for `minutes` (interop/campaign.py); prints each new bug once."""
    from tinyspec.interop.campaign import campaign
    return campaign(minutes, devices, out, seed, log, lambda d: TinygradBackend(d).triage)

  def kernel_uops(self, graph, res, inputs: dict):
    """(the kernel's SINK of UOps over placeholders, [(input name, dtype, shape) per PARAM
    slot]): what run() would give Tensor.custom_kernel (a repro writes it with pyrender)."""
    from tinygrad.uop.ops import UOp
    kb = _KernelBuilder(self, graph, res, inputs)
    params = kb.params()
    kb.slot_index = {slot: k for k, slot in enumerate(sorted(params))}   # as outputs() numbers them
    slots = [(graph.nodes[params[s]].arg.get("name") or f"param{s}", res.views[params[s]].dtype, tuple(res.views[params[s]].shape)) for s in sorted(params)]
    kb.placeholders = [UOp.placeholder((int(np.prod(sh)),), tg_dtype(dt), k) for k, (_, dt, sh) in enumerate(slots)]
    return drive(kb.root, kb._gen, {}), slots

  def run(self, graph, inputs: dict) -> dict:
    from tinyspec.validate import validate
    self.setup()
    res = validate(graph)
    if not res.ok:
      d = res.diagnostics[0]
      raise Refused(d.format(), d.rule)
    if res.level not in ("tensor", "kernel"): raise Refused(f"{res.level}-level graphs are not run by the tinygrad backend", "backend.unsupported")
    with _device_context(self.device):
      try:
        if res.level == "tensor": return _TensorBuilder(self, graph, res, inputs).outputs()
        return _KernelBuilder(self, graph, res, inputs).outputs()
      except Unexpressed as e:   # the adapter's own limit, not tinygrad's failure
        raise Refused(str(e), "backend.unsupported") from None


# ------------------------------------------------------------------ shared helpers
def _spec_const(v, dtype: str):
  if isinstance(v, str): return float(v)     # "nan", "inf", "-inf"
  if dtype == "bool": return bool(v)
  return v


def _to_tensor(a: np.ndarray, dtype: str, shape, device):
  from tinygrad import Tensor, dtypes
  a = np.ascontiguousarray(np.asarray(a).reshape(shape))
  if dtype == "bfloat16": return Tensor(a.view(np.uint16), device=device).bitcast(dtypes.bfloat16)
  return Tensor(a, device=device, dtype=tg_dtype(dtype))


def _on_device(t, device: str):
  """t, with a value of constants only put on `device`. tinygrad keeps such a value on no
  device (Tensor(3, device=D) is a CONST without D, tensor.py Tensor.__init__), `.to(D)`
  leaves it there (tensor.py Tensor.to: `if self.uop.device is None: return self`), and
  `.numpy()` would realize it on a hard-coded CPU (tensor.py Tensor._buffer:
  `x.clone("CPU")`), which compiles with clang whatever DEV says. The same clone as
  _buffer's, to the backend's device."""
  if t.device is not None: return t
  return t.contiguous().clone(device)


def _from_tensor(t, dtype: str, device: str) -> np.ndarray:
  from tinyspec.refimpl.numeric import np_dtype
  from tinygrad import dtypes
  if dtype == "bfloat16": return _on_device(t.bitcast(dtypes.uint16), device).numpy().view(np_dtype("bfloat16"))
  return np.asarray(_on_device(t, device).numpy()).astype(np_dtype(dtype), copy=False)


# ------------------------------------------------------------------ tensor level
class _TensorBuilder:
  """Builds a tensor-level graph in tinygrad: value(node, env) for each needed node, where
  env binds the PARAM slots of the function body being inlined (None at top level)."""

  def __init__(self, backend, graph, res, inputs):
    from tinyspec.tables import tables
    self.g, self.res, self.inputs = graph, res, dict(inputs)
    self.views, self.T = res.views, tables()
    self.dev = _device_map(backend.device)
    self.backend = backend
    self.memo: dict = {}
    self.envs: list = [None]            # env id -> tuple of bound argument values
    self.final: dict = {}               # storage root -> its last stored version (graph order)

  def value(self, i: int, env: int = 0):
    return drive((i, env), self._gen, self.memo)

  def outputs(self) -> dict:
    out = {}
    roots = self.g.root_indices
    values = [self.value(r) for r in roots]
    k = 0
    for r, v in zip(roots, values):
      dt = self.views[r].dtype
      if dt == "void": continue
      if isinstance(v, tuple):
        for j, x in enumerate(v): out[f"out{k}.{j}"] = _from_tensor(x, dt[j], self.backend.device)
      else: out[f"out{k}"] = _from_tensor(v, dt, self.backend.device)
      k += 1
    for root, t in self.final.items():
      out[self._input_name(root)] = _from_tensor(t, self.views[root].dtype, self.backend.device)
    return out

  # ---- node helpers
  def _input_name(self, i: int) -> str:
    n = self.g.nodes[i]
    a = n.arg
    if a.get("name"): return a["name"]
    return f"{'buf' if n.op == 'BUFFER' else 'param'}{a['slot']}"

  def _shape(self, i: int) -> tuple:
    from tinyspec.rules import shape_value
    return tuple(shape_value(self.views[i]))

  def _root(self, i: int) -> int:
    """The storage a node refers to (through INDEX/AFTER/markers: `storage: through`)."""
    nodes = self.g.nodes
    while self.T.ops[nodes[i].op].storage == "through": i = nodes[i].src[0]
    return i

  def _gen(self, key):
    i, env = key
    n = self.g.nodes[i]
    h = getattr(self, "t_" + n.op, None)
    if h is not None: return h(i, env, n)
    od = self.T.ops[n.op]
    if od.category in ("elementwise", "decomposed"): return self.t_elementwise(i, env, n)
    if od.category == "marker": return self.t_marker(i, env, n)
    return self.t_unsupported(i, env, n)

  def t_unsupported(self, i, env, n):
    raise Unexpressed(f"node {i} ({n.op}): not built by the tinygrad backend")
    yield

  # ---- sources
  def t_CONST(self, i, env, n):
    from tinygrad import Tensor   # a CONST on no device (tinygrad drops the device of a scalar); naming it keeps Device.DEFAULT out
    return Tensor(_spec_const(n.arg["value"], n.arg["dtype"]), dtype=tg_dtype(n.arg["dtype"]), device=self.dev("CPU"))
    yield

  def t_VCONST(self, i, env, n):
    from tinygrad import Tensor
    dt = n.arg["dtype"]
    return Tensor([_spec_const(v, dt) for v in n.arg["values"]], dtype=tg_dtype(dt), device=self.dev("CPU"))
    yield

  def t_BUFFER(self, i, env, n):
    from tinygrad import Tensor
    if n.op == "PARAM" and self.envs[env] is not None: return self.envs[env][n.arg["slot"]]
    v = self.views[i]
    name = self._input_name(i)
    dev = self.dev(v.device if v.device is not None else "CPU")
    if name in self.inputs: return _to_tensor(self.inputs[name], v.dtype, v.shape, dev)
    return Tensor.zeros(*v.shape, dtype=tg_dtype(v.dtype), device=dev).contiguous()
    yield

  t_PARAM = t_BUFFER

  def t_BINARY(self, i, env, n):
    import base64
    from tinygrad import Tensor
    return Tensor(np.frombuffer(base64.b64decode(n.arg["data"]), dtype=np.uint8).copy(), device=self.dev("CPU"))
    yield

  # ---- movement
  def t_RESHAPE(self, i, env, n):
    x = yield n.src[0], env
    return x.reshape(self._shape(n.src[1]))

  def t_EXPAND(self, i, env, n):
    x = yield n.src[0], env
    return x.expand(self._shape(n.src[1]))

  def t_PAD(self, i, env, n):
    x = yield n.src[0], env
    o, s = self._shape(n.src[1]), self._shape(n.src[2])
    return x.pad(tuple((a, b - a - d) for a, b, d in zip(o, s, x.shape)))

  def t_SHRINK(self, i, env, n):
    x = yield n.src[0], env
    o, s = self._shape(n.src[1]), self._shape(n.src[2])
    return x.shrink(tuple((a, a + k) for a, k in zip(o, s)))

  def t_PERMUTE(self, i, env, n):
    x = yield n.src[0], env
    return x.permute(tuple(n.arg))

  def t_FLIP(self, i, env, n):
    x = yield n.src[0], env
    axes = tuple(k for k, f in enumerate(n.arg) if f)
    return x.flip(axes) if axes else x

  def t_STACK(self, i, env, n):
    from tinygrad import Tensor
    xs = []
    for s in n.src: xs.append((yield s, env))
    return Tensor.stack(*xs)

  def t_BITCAST(self, i, env, n):
    x = yield n.src[0], env
    return x.bitcast(tg_dtype(n.arg))

  def t_INDEX(self, i, env, n):
    """Outer indexing from the left: a ()-shaped index drops its axis, a (k,) one makes it k.
    tinygrad's getitem reads a negative index from the end (Python's rule) and one past the
    end as 0; the spec reads both as 0 (decision index-oob): a negative one is masked."""
    x = yield n.src[0], env
    axis = 0
    for s in n.src[1:]:
      idx = yield s, env
      rest = len(x.shape) - axis - 1
      x = x[(slice(None),) * axis + (idx,)]
      neg = (idx < 0).reshape((1,) * axis + tuple(idx.shape) + (1,) * rest)
      x = neg.where(x.zeros_like(), x)
      if len(self.views[s].shape) == 1: axis += 1
    return x

  # ---- reduce
  def t_REDUCE(self, i, env, n):
    from tinygrad.uop.ops import Ops
    x = yield n.src[0], env
    axes = tuple(n.arg.get("axes", ()))
    if not axes: return x
    return x._rop(Ops[n.arg["op"]], axes).reshape(self.views[i].shape)

  # ---- elementwise
  def t_elementwise(self, i, env, n):
    srcs = []
    for s in n.src: srcs.append((yield s, env))
    shape = self.views[i].shape
    srcs = [t._broadcast_to(shape) if tuple(t.shape) != shape else t for t in srcs]
    return self.elementwise(n, srcs)

  def elementwise(self, n, srcs):
    B = _backend_table()
    if n.op == "CAST": return srcs[0].cast(tg_dtype(n.arg))
    if n.op in B["methods"]: return getattr(srcs[0], B["methods"][n.op])(*srcs[1:])
    op = tg_op(n.op)
    if op is None: raise Unexpressed(f"{n.op}: no tinygrad op")
    return srcs[0].alu(op, *srcs[1:])

  def t_marker(self, i, env, n):
    x = yield n.src[0], env
    return {"CONTIGUOUS": x.contiguous, "CONTIGUOUSBACKWARD": x.contiguous_backward, "DETACH": x.detach}[n.op]()

  # ---- devices
  def t_COPY(self, i, env, n):
    x = yield n.src[0], env
    return x.to(self.dev(n.arg["device"]))

  def t_LOAD(self, i, env, n):
    x = yield n.src[0], env
    if n.arg and n.arg.get("device") is not None: x = x.to(self.dev(n.arg["device"]))
    if len(n.src) == 3:
      alt = yield n.src[1], env
      gate = yield n.src[2], env
      x = gate.where(x, alt)
    return x

  # ---- calls: inlined
  def t_FUNCTION(self, i, env, n):
    args = []
    for s in n.src[1:]: args.append((yield s, env))
    self.envs.append(tuple(args))
    return (yield n.src[0], len(self.envs) - 1)

  def t_CALL(self, i, env, n):
    if self.g.nodes[n.src[0]].op == "SINK":
      return (yield from self.kernel_call(i, env, n))
    return (yield from self.t_FUNCTION(i, env, n))

  def t_TUPLE(self, i, env, n):
    xs = []
    for s in n.src: xs.append((yield s, env))
    return tuple(xs)

  def t_GETTUPLE(self, i, env, n):
    t = yield n.src[0], env
    return t[n.arg]

  def kernel_call(self, i, env, n):
    """CALL(SINK kernel, buffers...): the kernel runs on the arguments; each argument's
    storage gets the kernel's result as its new version."""
    args = []
    for s in n.src[1:]: args.append((yield s, env))
    body = _KernelBuilder(self.backend, self.g, self.res, {}, root=n.src[0])
    outs = body.run_on(args)
    for s, t in zip(n.src[1:], outs): self.final[self._root(s)] = t
    return {self._root(s): t for s, t in zip(n.src[1:], outs)}

  # ---- storage: STORE makes a version, AFTER reads the one its dependencies made
  def t_STORE(self, i, env, n):
    target = self._root(n.src[0])
    if self.g.nodes[n.src[0]].op == "INDEX":
      raise Unexpressed(f"node {i} (STORE): a store through INDEX at tensor level")
    old = yield n.src[0], env
    val = yield n.src[1], env
    val = val._broadcast_to(tuple(old.shape)) if tuple(val.shape) != tuple(old.shape) else val
    if len(n.src) == 3:
      gate = yield n.src[2], env
      val = gate.where(val, old)
    self.final[target] = val
    return {target: val}

  def t_AFTER(self, i, env, n):
    x = yield n.src[0], env
    root = self._root(n.src[0])
    for d in n.src[1:]:
      effects = yield d, env
      if isinstance(effects, dict) and root in effects: x = effects[root]
    return x

  def t_GROUP(self, i, env, n):
    out: dict = {}
    for s in n.src:
      e = yield s, env
      if isinstance(e, dict): out.update(e)
    return out

  t_SINK = t_GROUP


# ------------------------------------------------------------------ kernel level
class _KernelBuilder:
  """A kernel-level graph (SINK over PARAMs) as a tinygrad kernel of UOps, run with
  Tensor.custom_kernel: the kernel's PARAM k is the k-th tensor (input param{k})."""

  def __init__(self, backend, graph, res, inputs, root: int | None = None):
    from tinyspec.tables import tables
    self.backend, self.g, self.res, self.inputs = backend, graph, res, dict(inputs)
    self.views, self.T = res.views, tables()
    self.root = graph.root_indices[-1] if root is None else root
    self.dev = _device_map(backend.device)

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

  def outputs(self) -> dict:
    """Run the kernel on the inputs: tinygrad binds one tensor per PARAM it uses, so the
    slots the graph uses are numbered 0..k-1 for tinygrad (a slot the graph skips binds nothing)."""
    from tinygrad import Tensor
    params = self.params()
    self.slot_index = {slot: k for k, slot in enumerate(sorted(params))}
    tensors = []
    for slot in sorted(params):
      v = self.views[params[slot]]
      name = self.g.nodes[params[slot]].arg.get("name") or f"param{slot}"
      size = int(np.prod(v.shape))
      t = (_to_tensor(self.inputs[name], v.dtype, (size,), self.dev("CPU")) if name in self.inputs
           else Tensor.zeros(size, dtype=tg_dtype(v.dtype), device=self.dev("CPU")).contiguous())
      tensors.append((slot, name, v.dtype, v.shape, t))
    outs = self.run_on([t for *_, t in tensors])
    stored = self.stored_slots()
    return {name: _from_tensor(o, dt, self.backend.device).reshape(shape) for (slot, name, dt, shape, _), o in zip(tensors, outs) if slot in stored}

  def stored_slots(self) -> set:
    """The PARAM slots some STORE writes."""
    out = set()
    for n in self.g.nodes:
      if n.op == "STORE":
        j = n.src[0]
        while self.T.ops[self.g.nodes[j].op].storage == "through": j = self.g.nodes[j].src[0]
        if self.g.nodes[j].op == "PARAM": out.add(self.g.nodes[j].arg["slot"])
    return out

  def run_on(self, tensors: list) -> list:
    from tinygrad import Tensor
    if not tensors: raise Refused("a kernel without PARAMs", "backend.unsupported")
    def fxn(*placeholders):
      self.placeholders = placeholders
      return drive(self.root, self._gen, {})
    outs = Tensor.custom_kernel(*[_on_device(t, self.dev("CPU")).contiguous() for t in tensors], fxn=fxn)
    Tensor.realize(*outs)
    return outs

  def _gen(self, i):
    n = self.g.nodes[i]
    h = getattr(self, "k_" + n.op, None)
    if h is not None: return h(i, n)
    od = self.T.ops[n.op]
    if od.category in ("elementwise", "decomposed"): return self.k_elementwise(i, n)
    return self.k_unsupported(i, n)

  def k_unsupported(self, i, n):
    raise Unexpressed(f"node {i} ({n.op}): not built in a kernel by the tinygrad backend")
    yield

  def k_PARAM(self, i, n):
    slot = n.arg["slot"]
    return self.placeholders[getattr(self, "slot_index", {}).get(slot, slot)]
    yield

  def k_CONST(self, i, n):
    from tinygrad.uop.ops import UOp
    return UOp.const(_spec_const(n.arg["value"], n.arg["dtype"]), tg_dtype(n.arg["dtype"], kernel=True))
    yield

  def k_RANGE(self, i, n):
    from tinygrad.uop.ops import UOp, AxisType
    bound = yield n.src[0]
    ty = _backend_table()["axis_types"].get(n.arg.get("type", "LOOP"), n.arg.get("type", "LOOP"))
    return UOp.range(bound, n.arg["id"], AxisType[ty])

  def k_SPECIAL(self, i, n):
    from tinygrad.uop.ops import UOp
    bound = yield n.src[0]
    return UOp.special(bound, n.arg["name"])

  def _flat_index(self, n):
    """INDEX(p, i, j, ...) on a PARAM: (the row-major flat index, the condition that every
    index is in range or None where tinygrad's own vmin/vmax prove it). Decision index-oob:
    an access out of range reads zero and writes nothing, which is tinygrad's masked
    access `INDEX(p, i.valid(ok))`; tinygrad leaves an ungated one undefined (its PYTHON
    device raises IndexError)."""
    idx = []
    for s in n.src[1:]: idx.append((yield s))
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

  def k_INDEX(self, i, n):
    return (yield from self._access(n))

  def k_LOAD(self, i, n):
    """LOAD(INDEX(p, i), alt, gate): tinygrad's masked read INDEX(p, i.valid(gate)), which
    reads zero where the gate is false; alt elsewhere than zero is a WHERE after it."""
    if len(n.src) == 1: return (yield n.src[0])
    idx_node = self.g.nodes[n.src[0]]
    if idx_node.op != "INDEX": raise Unexpressed(f"node {i} (LOAD): a gated load of {idx_node.op}")
    alt = yield n.src[1]
    gate = yield n.src[2]
    x = yield from self._access(idx_node, gate)
    return gate.where(x, alt)

  def k_STORE(self, i, n):
    idx_node = self.g.nodes[n.src[0]]
    val = yield n.src[1]
    if len(n.src) == 3:
      if idx_node.op != "INDEX": raise Unexpressed(f"node {i} (STORE): a gated store to {idx_node.op}")
      gate = yield n.src[2]
      return (yield from self._access(idx_node, gate)).store(val)
    target = yield n.src[0]
    return target.store(val)

  def k_END(self, i, n):
    body = yield n.src[0]
    rngs = []
    for s in n.src[1:]: rngs.append((yield s))
    return body.end(*rngs)

  def k_REDUCE(self, i, n):
    from tinygrad.uop.ops import UOp, Ops
    x = yield n.src[0]
    rngs = []
    for s in n.src[1:]: rngs.append((yield s))
    return UOp(Ops.REDUCE, x.dtype, (x, *rngs), (Ops[n.arg["op"]], 0))

  def k_GROUP(self, i, n):
    from tinygrad.uop.ops import UOp
    srcs = []
    for s in n.src: srcs.append((yield s))
    return UOp.group(*srcs)

  def k_SINK(self, i, n):
    from tinygrad.uop.ops import UOp, KernelInfo
    srcs = []
    for s in n.src: srcs.append((yield s))
    return UOp.sink(*srcs, arg=KernelInfo(name=(n.arg or {}).get("name") or "tinyspec"))

  def k_elementwise(self, i, n):
    srcs = []
    for s in n.src: srcs.append((yield s))
    B = _backend_table()
    if n.op == "CAST": return srcs[0].cast(tg_dtype(n.arg, kernel=True))
    if n.op in B["methods"]: return getattr(srcs[0], B["methods"][n.op])(*srcs[1:])
    op = tg_op(n.op)
    if op is None: raise Unexpressed(f"{n.op}: no tinygrad op")
    return srcs[0].alu(op, *srcs[1:])
