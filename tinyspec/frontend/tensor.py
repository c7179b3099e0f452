"""A lazy Tensor: every method builds hash-consed UOps; nothing runs until realize().

A Tensor wraps one UOp. Its shape, dtype, device and axis are the UOp's derived
properties (tinyspec.frontend.derive checks each new node against the tables as it is
built, so a bad reshape fails at the line that wrote it, with the rule id).

Conventions (kept simple on purpose):
* dtypes: binary ops need equal dtypes (the tables' `same: A` slots); a Python scalar
  becomes a CONST of the other operand's dtype; anything else is an explicit .cast().
  Python int -> int32, float -> float32, bool -> bool when nothing else decides.
* broadcasting: elementwise ops take sources of different shapes as they are; the spec's
  elementwise ops broadcast (ops.yaml conflict `elementwise-broadcast`). A Python scalar
  is a ()-shaped CONST.
* decomposed ops (SUB, DIV, CMPEQ, NEG, ...) are built as their own nodes, not expanded.
* reduces (sum/max/prod) emit REDUCE, which keeps the axes as 1, then a RESHAPE that
  drops them unless keepdim; .replicated(axis) does the same with REPLICATED.
* data: a Tensor made from NumPy data is a BUFFER of its own (tinyspec.frontend.buffers:
  its identity is a tag no graph file can hold); the array is bound to it. .graph(),
  .inputs() and realize() number a graph's buffers 0, 1, 2... and pass each array as
  input `buf{k}`.
"""
from __future__ import annotations
import math
import numpy as np
from tinyspec.uop import UOp
from tinyspec.graph import Graph
from tinyspec.dtypes import DTYPES
from tinyspec.intervals import np_dtype
from tinyspec.frontend.nodes import dtype_name, const, shape_uop, _FROM_NP, _PY_DEFAULT
from tinyspec.frontend import indexing
from tinyspec.frontend.derive import derive
from tinyspec.frontend.backends import get_backend
from tinyspec.frontend.buffers import new_buffer, data_of, export as _export

DEFAULT_DEVICE = "CPU"


def _device_arg(device):
  return list(device) if isinstance(device, (tuple, list)) else device


def _dims(args) -> tuple:
  """reshape(2, 3) and reshape((2, 3)) alike."""
  if len(args) == 1 and isinstance(args[0], (tuple, list)): args = tuple(args[0])
  return tuple(int(a) for a in args)


# ------------------------------------------------------------------ the Tensor
class Tensor:
  __slots__ = ("uop", "_value", "__weakref__")
  __hash__ = object.__hash__   # == builds a CMPEQ node; identity stays the hash

  def __init__(self, data, dtype=None, device=None):
    if isinstance(data, Tensor): data = data.uop
    if isinstance(data, UOp):
      if dtype is not None or device is not None: raise TypeError("a Tensor made from a UOp takes its dtype and device from it")
      u = data
    elif isinstance(data, (bool, int, float, np.generic)):
      dt = dtype_name(dtype) if dtype is not None else (_FROM_NP[data.dtype.name] if isinstance(data, np.generic) else _PY_DEFAULT[type(data)])
      u = const(data, dt)
      if device is not None: u = UOp("COPY", (u,), {"device": _device_arg(device)})
    else:
      if isinstance(data, (list, tuple)) and dtype is None:   # Python numbers get the default dtypes
        data = np.asarray(data)
        if data.dtype.kind == "i": data = data.astype(np.int32)
        elif data.dtype.kind == "f": data = data.astype(np.float32)
      arr = np.asarray(data)
      if dtype is not None: arr = arr.astype(np_dtype(dtype_name(dtype)))
      if arr.dtype.name not in _FROM_NP: raise TypeError(f"NumPy dtype {arr.dtype} has no spec dtype")
      data = np.array(arr, order="C", copy=True)   # the value at construction, not later mutations
      u = _buffer(arr.shape, _FROM_NP[arr.dtype.name], device or DEFAULT_DEVICE, data)
    self.uop = u
    self._value = None
    derive(u)

  @staticmethod
  def from_uop(u: UOp) -> "Tensor":
    return Tensor(u)

  # ---- constructors
  @staticmethod
  def empty(*shape, dtype="float32", device=None) -> "Tensor":
    """A BUFFER with no data bound (it reads as zeros when realized)."""
    return Tensor(_buffer(_dims(shape), dtype_name(dtype), device or DEFAULT_DEVICE))

  @staticmethod
  def full(shape, value, dtype=None, device=None) -> "Tensor":
    """CONST reshaped to all-1 dims and EXPANDed: a broadcast view, no storage. A CONST is
    on no device (it goes anywhere); with `device` it is COPYed there."""
    shape = _dims((shape,) if isinstance(shape, int) else shape)
    dt = dtype_name(dtype) if dtype is not None else _PY_DEFAULT[type(value) if type(value) in _PY_DEFAULT else float]
    t = Tensor(const(value, dt))
    if shape: t = t.reshape((1,) * len(shape)).expand(shape)
    return t.copy(device) if device is not None else t

  @staticmethod
  def zeros(*shape, dtype="float32", device=None) -> "Tensor": return Tensor.full(_dims(shape), 0, dtype, device)

  @staticmethod
  def ones(*shape, dtype="float32", device=None) -> "Tensor": return Tensor.full(_dims(shape), 1, dtype, device)

  # Tensor.arange is compositions.arange (a composition of the methods here), attached
  # by that module when it loads.

  # ---- properties (derived by the tables)
  @property
  def props(self): return self.uop._props
  @property
  def shape(self) -> tuple: return self.uop._props.shape
  @property
  def dtype(self) -> str: return self.uop._props.dtype
  @property
  def device(self): return self.uop._props.device
  @property
  def axis(self): return self.uop._props.axis
  @property
  def min_max(self): return self.uop._props.min_max
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return math.prod(self.shape)
  def __len__(self) -> int:
    if not self.shape: raise TypeError("len() of a 0-d tensor")
    return self.shape[0]

  def __repr__(self) -> str:
    return f"<Tensor {self.uop.op} shape={self.shape} dtype={self.dtype} device={self.device}>"

  def __bool__(self):
    raise TypeError("the truth value of a lazy Tensor is unknown until it is realized; use .numpy()")

  # ---- building blocks
  def _op(self, op: str, *srcs: UOp, arg=None) -> "Tensor":
    return Tensor(UOp(op, (self.uop,) + srcs, arg))

  def _operand(self, x) -> UOp:
    """A binary op's other source: a Tensor's UOp, or a Python scalar as a CONST of self's dtype."""
    if isinstance(x, Tensor): return x.uop
    if isinstance(x, (bool, int, float, np.generic)): return const(x, self.dtype)
    raise TypeError(f"cannot combine a Tensor with {type(x).__name__}")

  def _binary(self, op: str, x, reverse=False) -> "Tensor":
    a, b = self.uop, self._operand(x)
    return Tensor(UOp(op, (b, a) if reverse else (a, b)))

  def _axes(self, axis) -> tuple:
    if axis is None: return tuple(range(self.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(a + self.ndim if a < 0 else a for a in axes)
    if any(not 0 <= a < self.ndim for a in out): raise IndexError(f"axis {axis} out of range for {self.ndim} dims")
    return out

  # ---- movement
  def reshape(self, *shape) -> "Tensor":
    shape = _dims(shape)
    if shape.count(-1) > 1: raise ValueError("only one dim may be -1")
    if -1 in shape:
      rest = math.prod(d for d in shape if d != -1)
      if rest == 0 or self.numel() % rest: raise ValueError(f"cannot reshape {self.shape} to {shape}")
      shape = tuple(self.numel() // rest if d == -1 else d for d in shape)
    return self._op("RESHAPE", shape_uop(shape))

  def expand(self, *shape) -> "Tensor":
    """Broadcast size-1 axes; -1 keeps a dim; extra leading dims are added by a RESHAPE."""
    shape = _dims(shape)
    x = self
    if len(shape) > x.ndim: x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    shape = tuple(o if d == -1 else d for d, o in zip(shape, x.shape))
    return x._op("EXPAND", shape_uop(shape))

  def permute(self, *order) -> "Tensor":
    return self._op("PERMUTE", arg=[a + self.ndim if a < 0 else a for a in _dims(order)])

  def transpose(self, dim0=1, dim1=0) -> "Tensor":
    order = list(range(self.ndim))
    a, b = self._axes((dim0, dim1))
    order[a], order[b] = order[b], order[a]
    return self.permute(order)

  @property
  def T(self) -> "Tensor": return self.transpose()

  def flip(self, axis) -> "Tensor":
    axes = self._axes(axis)
    return self._op("FLIP", arg=[i in axes for i in range(self.ndim)])

  def pad_to(self, *shape, offset=None) -> "Tensor":
    """The spec's PAD: place self at `offset` (default 0) in an output of `shape`; the
    rest reads as zero (decision pad-fill)."""
    shape = _dims(shape)
    offset = (0,) * len(shape) if offset is None else _dims((offset,))
    return self._op("PAD", shape_uop(offset), shape_uop(shape))

  def pad(self, padding) -> "Tensor":
    """(before, after) amounts: one pair (or None) per axis, or torch-style flat ints
    (before_last, after_last, before_second_last, ...). `T.pad((n-1, 0))` on a 1-D T puts
    n-1 zeros in front."""
    padding = list(padding)
    if all(p is None or isinstance(p, (tuple, list)) for p in padding):
      if len(padding) != self.ndim: raise ValueError(f"need one (before, after) pair per axis ({self.ndim}), got {len(padding)}")
      pairs = [(0, 0) if p is None else tuple(p) for p in padding]
    else:
      if len(padding) % 2 or len(padding) > 2 * self.ndim: raise ValueError(f"flat padding needs an even count of at most {2 * self.ndim} ints")
      flat = [(padding[i], padding[i + 1]) for i in range(0, len(padding), 2)][::-1]
      pairs = [(0, 0)] * (self.ndim - len(flat)) + flat
    if any(b < 0 or a < 0 for b, a in pairs): raise ValueError("negative padding: use shrink")
    return self.pad_to(tuple(b + d + a for (b, a), d in zip(pairs, self.shape)), offset=tuple(b for b, _ in pairs))

  def shrink_to(self, *shape, offset=None) -> "Tensor":
    """The spec's SHRINK: keep `shape` elements per axis starting at `offset` (default 0)."""
    shape = _dims(shape)
    offset = (0,) * len(shape) if offset is None else _dims((offset,))
    return self._op("SHRINK", shape_uop(offset), shape_uop(shape))

  def shrink(self, arg) -> "Tensor":
    """Keep [start, end) per axis: one (start, end) pair or None per axis."""
    arg = list(arg)
    if len(arg) != self.ndim: raise ValueError(f"need one (start, end) pair per axis ({self.ndim}), got {len(arg)}")
    pairs = [(0, d) if p is None else tuple(p) for p, d in zip(arg, self.shape)]
    return self.shrink_to(tuple(e - b for b, e in pairs), offset=tuple(b for b, _ in pairs))

  def stack(self, *others, dim=0) -> "Tensor":
    """STACK joins along a new leading axis; `dim` moves that axis with a PERMUTE.
    Tensor.stack(a, b) and a.stack(b) are the same."""
    if len(others) == 1 and isinstance(others[0], (list, tuple)): others = tuple(others[0])
    t = Tensor(UOp("STACK", (self.uop,) + tuple(o.uop for o in others)))
    dim = dim + t.ndim if dim < 0 else dim
    if dim == 0: return t
    order = list(range(1, t.ndim)); order.insert(dim, 0)
    return t.permute(order)

  def bitcast(self, dtype) -> "Tensor": return self._op("BITCAST", arg=dtype_name(dtype))

  def __getitem__(self, idx) -> "Tensor": return indexing.getitem(self, idx)

  # ---- elementwise
  def cast(self, dtype) -> "Tensor": return self._op("CAST", arg=dtype_name(dtype))
  def neg(self) -> "Tensor": return self._op("NEG")
  def recip(self) -> "Tensor": return self._op("RECIP")
  reciprocal = recip
  def trunc(self) -> "Tensor": return self._op("TRUNC")
  def exp2(self) -> "Tensor": return self._op("EXP2")
  def log2(self) -> "Tensor": return self._op("LOG2")
  def sin(self) -> "Tensor": return self._op("SIN")
  def sqrt(self) -> "Tensor": return self._op("SQRT")
  def logical_not(self) -> "Tensor": return self._op("NOT")
  def exp(self) -> "Tensor": return (self * (1 / math.log(2))).exp2()
  def log(self) -> "Tensor": return self.log2() * math.log(2)
  def relu(self) -> "Tensor": return self.maximum(0)
  def abs(self) -> "Tensor": return self.maximum(-self)

  def maximum(self, x) -> "Tensor": return self._binary("MAX", x)
  def minimum(self, x) -> "Tensor":
    """There is no MIN op: min(a, b) = inv(max(inv(a), inv(b))) with an order-reversing
    inv that cannot overflow (NEG for floats, bitwise not for integers, NOT for bool)."""
    other = Tensor(self._operand(x))
    return self._inverse().maximum(other._inverse())._inverse()

  def _inverse(self) -> "Tensor":
    cls = DTYPES[self.dtype].cls
    if cls == "float": return -self
    if cls == "bool": return self.logical_not()
    return self ^ _all_ones(self.dtype)

  def where(self, a, b) -> "Tensor":
    """WHERE(self, a, b): a where self is nonzero. A scalar branch takes the other's dtype."""
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
      a = Tensor(a); b = Tensor(b, dtype=a.dtype)
    elif not isinstance(a, Tensor): a = Tensor(a, dtype=b.dtype)
    elif not isinstance(b, Tensor): b = Tensor(b, dtype=a.dtype)
    return Tensor(UOp("WHERE", (self.uop, a.uop, b.uop)))

  def __neg__(self): return self.neg()
  def __invert__(self): return self.logical_not() if self.dtype == "bool" else self ^ _all_ones(self.dtype)
  def __add__(self, x): return self._binary("ADD", x)
  def __radd__(self, x): return self._binary("ADD", x, True)
  def __sub__(self, x): return self._binary("SUB", x)
  def __rsub__(self, x): return self._binary("SUB", x, True)
  def __mul__(self, x): return self._binary("MUL", x)
  def __rmul__(self, x): return self._binary("MUL", x, True)
  def __truediv__(self, x): return self._binary("DIV", x)
  def __rtruediv__(self, x): return self._binary("DIV", x, True)
  def __floordiv__(self, x): return self._binary("IDIV", x)
  def __rfloordiv__(self, x): return self._binary("IDIV", x, True)
  def __mod__(self, x): return self._binary("MOD", x)
  def __rmod__(self, x): return self._binary("MOD", x, True)
  def __pow__(self, x): return self._binary("POW", x)
  def __rpow__(self, x): return self._binary("POW", x, True)
  def __and__(self, x): return self._binary("AND", x)
  def __rand__(self, x): return self._binary("AND", x, True)
  def __or__(self, x): return self._binary("OR", x)
  def __ror__(self, x): return self._binary("OR", x, True)
  def __xor__(self, x): return self._binary("XOR", x)
  def __rxor__(self, x): return self._binary("XOR", x, True)
  def __lshift__(self, x): return self._binary("SHL", x)
  def __rlshift__(self, x): return self._binary("SHL", x, True)
  def __rshift__(self, x): return self._binary("SHR", x)
  def __rrshift__(self, x): return self._binary("SHR", x, True)
  def __eq__(self, x): return self._binary("CMPEQ", x)      # type: ignore[override]
  def __ne__(self, x): return self._binary("CMPNE", x)      # type: ignore[override]
  def __lt__(self, x): return self._binary("CMPLT", x)
  def __le__(self, x): return self._binary("CMPLE", x)
  def __gt__(self, x): return self._binary("CMPGT", x)
  def __ge__(self, x): return self._binary("CMPGE", x)
  def mulacc(self, b, c) -> "Tensor": return Tensor(UOp("MULACC", (self.uop, self._operand(b), self._operand(c))))

  # ---- reduce
  def _reduce(self, op: str, axis, keepdim: bool) -> "Tensor":
    axes = self._axes(axis)
    r = self._op("REDUCE", arg={"op": op, "axes": sorted(axes)})
    if keepdim or not axes: return r
    return r.reshape(tuple(d for i, d in enumerate(r.shape) if i not in axes))

  def sum(self, axis=None, keepdim=False) -> "Tensor": return self._reduce("ADD", axis, keepdim)
  def max(self, axis=None, keepdim=False) -> "Tensor": return self._reduce("MAX", axis, keepdim)
  def prod(self, axis=None, keepdim=False) -> "Tensor": return self._reduce("MUL", axis, keepdim)
  def min(self, axis=None, keepdim=False) -> "Tensor": return self._inverse().max(axis, keepdim)._inverse()

  # ---- markers, devices, side effects
  def contiguous(self) -> "Tensor": return self._op("CONTIGUOUS")
  def contiguous_backward(self) -> "Tensor": return self._op("CONTIGUOUSBACKWARD")
  def detach(self) -> "Tensor": return self._op("DETACH")

  def copy(self, device) -> "Tensor":
    """COPY to a device; to an n-tuple device it reshards along axis 0."""
    return self._op("COPY", arg={"device": _device_arg(device)})
  to = copy

  def replicated(self, axis=0) -> "Tensor":
    """REPLICATED (the axes collapse to 1, their slices being equal), then a RESHAPE that
    drops them, as .sum(axis) does (ops.yaml conflict replicated-shape)."""
    axes = self._axes(axis)
    r = self._op("REPLICATED", arg=sorted(axes))
    return r.reshape(tuple(d for i, d in enumerate(r.shape) if i not in axes))

  def assign(self, x) -> "Tensor":
    """STORE x into self's storage, then AFTER: self now reads the stored value."""
    val = Tensor(self._operand(x))
    if val.shape != self.shape: val = val._broadcast_to(self.shape)
    store = UOp("STORE", (self.uop, val.uop))
    self.uop, self._value = UOp("AFTER", (self.uop, store)), None
    derive(self.uop)
    return self

  def _broadcast_to(self, shape) -> "Tensor":
    x = self
    if x.ndim < len(shape): x = x.reshape((1,) * (len(shape) - x.ndim) + x.shape)
    return x.expand(shape)

  # ---- realizing
  def graph(self) -> Graph:
    """The graph of this tensor, for saving (`.graph().save(path)`) or evaluating: its
    buffers numbered 0, 1, 2... (see tinyspec.frontend.buffers.export)."""
    return _export([self.uop])[0]

  def inputs(self) -> dict:
    """The inputs of .graph(): `buf{k}` -> the k-th buffer's data."""
    return _export([self.uop])[1]

  def realize(self, backend="ref") -> "Tensor":
    realize(self, backend=backend)
    return self

  def numpy(self, backend="ref") -> np.ndarray:
    if (d := data_of(self.uop)) is not None: return d.copy()
    if self._value is None or self._value[0] is not self.uop: self.realize(backend)
    if (d := data_of(self.uop)) is not None: return d.copy()
    return self._value[1].copy()

  def item(self, backend="ref"):
    return self.numpy(backend).item()

  def tolist(self, backend="ref"):
    return self.numpy(backend).tolist()


def _buffer(shape, dt: str, device, data=None) -> UOp:
  return new_buffer(shape_uop(shape), dt, _device_arg(device), data)


def _all_ones(dt: str):
  """The integer whose bits are all 1 in dtype dt (-1 signed, max unsigned)."""
  return -1 if DTYPES[dt].cls in ("int", "index") else DTYPES[dt].max


def export(*tensors: Tensor) -> tuple[Graph, dict]:
  """The graph of several tensors (one root each) and its inputs, numbered as .graph() and
  .inputs() number them for one."""
  return _export([t.uop for t in tensors])


def bound_inputs(roots) -> dict:
  """The inputs of the graph of roots, keyed as export() numbers its buffers: bound
  arrays, zeros for unbound (empty) ones."""
  return _export(roots)[1]


def realize(*tensors: Tensor, backend="ref") -> list[np.ndarray]:
  """Evaluate the tensors in one graph (shared work done once). A result that a BUFFER can
  hold exactly (on one device, or sharded on axis 0) replaces the tensor's graph with a
  BUFFER bound to the data, as tinygrad's realize does; others keep their graph and cache
  the value."""
  graph, inputs = _export([t.uop for t in tensors])
  outs = get_backend(backend).run(graph, inputs)
  values = []
  for k, t in enumerate(tensors):
    if f"out{k}" not in outs: raise RuntimeError(f"backend {backend!r} returned no out{k} (got {sorted(outs)})")
    v = np.asarray(outs[f"out{k}"])
    values.append(v)
    dev = t.device
    if isinstance(dev, str) or (isinstance(dev, tuple) and t.axis == 0):
      buf = _buffer(t.shape, t.dtype, dev, v)
      derive(buf)
      t.uop = buf
    t._value = (t.uop, v)
  return values
