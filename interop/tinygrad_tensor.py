"""A tensor-level graph built through tinygrad's Tensor API, node by node: the `tinygrad`
backend's tensor level (interop/tinygrad_backend.py).

Sources become Tensors holding the inputs, movement ops the Tensor methods of the same
name, elementwise ops tinygrad's own op of the same meaning (`Tensor.alu`, or the method of
the map table's `backend.methods`), FUNCTION/CALL bodies are inlined with their PARAMs
bound to the arguments (a CALL of a kernel SINK runs it, interop/tinygrad_kernel.py), and
STORE/AFTER keep a version of each buffer (the reads a graph orders after a STORE see it,
decision store-order).

One builder per op in TENSOR_OPS; a builder asks for its sources (`yield source, env`) and
returns the Tensor it made (tinyspec/walk.py drives them).
"""
from __future__ import annotations
import base64
import numpy as np
from tinyspec.dispatch import Registry, input_name
from tinyspec.walk import drive
from tinyspec.interop.tinygrad_names import Unexpressed, apply_alu, tg_const, tg_dtype, tg_method
from tinyspec.interop.tinygrad_device import _device_map, from_tensor, to_tensor
from tinyspec.interop.tinygrad_kernel import KernelBuilder
from tinyspec.tables import tables
from tinyspec.rules import shape_value

TENSOR_OPS = Registry("tinygrad tensor builder")


class TensorBuilder:
  """value(node, env) for each needed node, where env binds the PARAM slots of the function
  body being inlined (0: none, the top level); `device` is the backend's tinygrad device."""

  def __init__(self, device: str, graph, res, inputs):
    self.device, self.g, self.res, self.inputs = device, graph, res, dict(inputs)
    self.views, self.T = res.views, tables()
    self.dev = _device_map(device)
    self.memo: dict = {}
    self.envs: list = [None]            # env id -> tuple of bound argument values
    self.final: dict = {}               # storage root -> its last stored version (graph order)

  def value(self, i: int, env: int = 0):
    return drive((i, env), self._build, self.memo)

  def outputs(self) -> dict:
    """{out{k} (out{k}.{j} for a tuple): each value root's value, and every stored buffer's
    input name: its final contents}."""
    out = {}
    roots = self.g.root_indices
    values = [self.value(r) for r in roots]
    k = 0
    for r, v in zip(roots, values):
      dt = self.views[r].dtype
      if dt == "void": continue
      if isinstance(v, tuple):
        for j, x in enumerate(v): out[f"out{k}.{j}"] = from_tensor(x, dt[j], self.device)
      else: out[f"out{k}"] = from_tensor(v, dt, self.device)
      k += 1
    for root, t in self.final.items():
      n = self.g.nodes[root]
      out[input_name(n.op, n.arg)] = from_tensor(t, self.views[root].dtype, self.device)
    return out

  # ---- node helpers
  def _shape(self, i: int) -> tuple:
    return tuple(shape_value(self.views[i]))

  def _root(self, i: int) -> int:
    """The storage a node refers to (through INDEX/AFTER/markers: `storage: through`)."""
    nodes = self.g.nodes
    while nodes[i].op in self.T.through_ops: i = nodes[i].src[0]
    return i

  def _sources(self, srcs, env):
    out = []
    for s in srcs: out.append((yield s, env))
    return out

  def _build(self, key):
    i, env = key
    n = self.g.nodes[i]
    return TENSOR_OPS.get(n.op, TensorBuilder.unsupported)(self, i, env, n)

  def unsupported(self, i, env, n):
    raise Unexpressed(f"node {i} ({n.op}): not built by the tinygrad backend")

  # ---- sources
  @TENSOR_OPS.register("CONST")
  def const(self, i, env, n):
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency); a CONST on no device (tinygrad drops the device of a scalar); naming it keeps Device.DEFAULT out
    return Tensor(tg_const(n.arg["value"], n.arg["dtype"]), dtype=tg_dtype(n.arg["dtype"]), device=self.dev("CPU"))

  @TENSOR_OPS.register("VCONST")
  def vconst(self, i, env, n):
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    dt = n.arg["dtype"]
    return Tensor([tg_const(v, dt) for v in n.arg["values"]], dtype=tg_dtype(dt), device=self.dev("CPU"))

  @TENSOR_OPS.register("BUFFER", "PARAM")
  def buffer(self, i, env, n):
    """An input (zeros where none is given); inside an inlined body, a PARAM is its argument."""
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    if n.op == "PARAM" and self.envs[env] is not None: return self.envs[env][n.arg["slot"]]
    v = self.views[i]
    name = input_name(n.op, n.arg)
    dev = self.dev(v.device if v.device is not None else "CPU")
    if name in self.inputs: return to_tensor(self.inputs[name], v.dtype, v.shape, dev)
    return Tensor.zeros(*v.shape, dtype=tg_dtype(v.dtype), device=dev).contiguous()

  @TENSOR_OPS.register("BINARY")
  def binary(self, i, env, n):
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    return Tensor(np.frombuffer(base64.b64decode(n.arg["data"]), dtype=np.uint8).copy(), device=self.dev("CPU"))

  # ---- movement
  @TENSOR_OPS.register("RESHAPE")
  def reshape(self, i, env, n):
    x = yield n.src[0], env
    return x.reshape(self._shape(n.src[1]))

  @TENSOR_OPS.register("EXPAND")
  def expand(self, i, env, n):
    x = yield n.src[0], env
    return x.expand(self._shape(n.src[1]))

  @TENSOR_OPS.register("PAD")
  def pad(self, i, env, n):
    x = yield n.src[0], env
    o, s = self._shape(n.src[1]), self._shape(n.src[2])
    return x.pad(tuple((a, b - a - d) for a, b, d in zip(o, s, x.shape)))

  @TENSOR_OPS.register("SHRINK")
  def shrink(self, i, env, n):
    x = yield n.src[0], env
    o, s = self._shape(n.src[1]), self._shape(n.src[2])
    return x.shrink(tuple((a, a + k) for a, k in zip(o, s)))

  @TENSOR_OPS.register("PERMUTE")
  def permute(self, i, env, n):
    x = yield n.src[0], env
    return x.permute(tuple(n.arg))

  @TENSOR_OPS.register("FLIP")
  def flip(self, i, env, n):
    x = yield n.src[0], env
    axes = tuple(k for k, f in enumerate(n.arg) if f)
    return x.flip(axes) if axes else x

  @TENSOR_OPS.register("STACK")
  def stack(self, i, env, n):
    from tinygrad import Tensor  # noqa: PLC0415 (tinygrad, an optional dependency)
    return Tensor.stack(*(yield from self._sources(n.src, env)))

  @TENSOR_OPS.register("BITCAST")
  def bitcast(self, i, env, n):
    x = yield n.src[0], env
    return x.bitcast(tg_dtype(n.arg))

  @TENSOR_OPS.register("INDEX")
  def index(self, i, env, n):
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

  # ---- reduce, elementwise, markers
  @TENSOR_OPS.register("REDUCE")
  def reduce(self, i, env, n):
    from tinygrad.uop.ops import Ops  # noqa: PLC0415 (tinygrad, an optional dependency)
    x = yield n.src[0], env
    axes = tuple(n.arg.get("axes", ()))
    if not axes: return x
    return x._rop(Ops[n.arg["op"]], axes).reshape(self.views[i].shape)

  @TENSOR_OPS.register(category="decomposed")
  @TENSOR_OPS.register(category="elementwise")
  def alu(self, i, env, n):
    srcs = yield from self._sources(n.src, env)
    shape = self.views[i].shape
    srcs = [t._broadcast_to(shape) if tuple(t.shape) != shape else t for t in srcs]
    return apply_alu(n.op, n.arg, srcs)

  @TENSOR_OPS.register(category="marker")
  def marker(self, i, env, n):
    x = yield n.src[0], env
    return getattr(x, tg_method(n.op))()

  # ---- devices
  @TENSOR_OPS.register("COPY")
  def copy(self, i, env, n):
    x = yield n.src[0], env
    return x.to(self.dev(n.arg["device"]))

  @TENSOR_OPS.register("LOAD")
  def load(self, i, env, n):
    x = yield n.src[0], env
    if n.arg and n.arg.get("device") is not None: x = x.to(self.dev(n.arg["device"]))
    if len(n.src) == 3:
      alt = yield n.src[1], env
      gate = yield n.src[2], env
      x = gate.where(x, alt)
    return x

  # ---- calls: a function body inlined, a kernel run
  def _body_and_args(self, n) -> tuple[int, list[int]]:
    """(the body source, the argument sources) of a FUNCTION/CALL (its `kind: body` slot)."""
    (b,) = self.T.body_slots(n.op)
    return n.src[b], [s for k, s in enumerate(n.src) if k != b]

  @TENSOR_OPS.register("FUNCTION")
  def function(self, i, env, n):
    body, arg_srcs = self._body_and_args(n)
    self.envs.append(tuple((yield from self._sources(arg_srcs, env))))
    return (yield body, len(self.envs) - 1)

  @TENSOR_OPS.register("CALL")
  def call(self, i, env, n):
    body, _ = self._body_and_args(n)
    if self.g.nodes[body].op == "SINK": return (yield from self.kernel_call(i, env, n))
    return (yield from self.function(i, env, n))

  def kernel_call(self, i, env, n):
    """CALL(SINK kernel, buffers...): the kernel runs on the arguments; each argument's
    storage gets the kernel's result as its new version."""
    body, arg_srcs = self._body_and_args(n)
    args = yield from self._sources(arg_srcs, env)
    outs = KernelBuilder(self.device, self.g, self.res, {}, root=body).run_on(args)
    for s, t in zip(arg_srcs, outs): self.final[self._root(s)] = t
    return {self._root(s): t for s, t in zip(arg_srcs, outs)}

  @TENSOR_OPS.register("TUPLE")
  def tuple_of(self, i, env, n):
    return tuple((yield from self._sources(n.src, env)))

  @TENSOR_OPS.register("GETTUPLE")
  def gettuple(self, i, env, n):
    t = yield n.src[0], env
    return t[n.arg]

  # ---- storage: STORE makes a version, AFTER reads the one its dependencies made
  @TENSOR_OPS.register("STORE")
  def store(self, i, env, n):
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

  @TENSOR_OPS.register("AFTER")
  def after(self, i, env, n):
    x = yield n.src[0], env
    root = self._root(n.src[0])
    for d in n.src[1:]:
      effects = yield d, env
      if isinstance(effects, dict) and root in effects: x = effects[root]
    return x

  @TENSOR_OPS.register("GROUP", "SINK")
  def group(self, i, env, n):
    out: dict = {}
    for s in n.src:
      e = yield s, env
      if isinstance(e, dict): out.update(e)
    return out
