"""Capture what a tinygrad program realizes: for every `Tensor.realize` (and everything
that calls it: `.numpy()`, `.tolist()`, `.item()`), the tensor-level graph of the realized
tensors with the contents of the buffers it reads, the schedule tinygrad made for it (one
record per CALL, with the contents of the CALL's buffers before and after it ran) and the
realized values.

    with capture() as cap:
      runpy.run_path("program.py")
    for r in cap.realizations: r.roots, r.inputs, r.outputs, r.calls

Hooks: `Tensor.realize` (the tensor graphs, before tinygrad rewrites them into buffers) and
the `run_linear` that `Tensor.realize` calls (the schedule: its CALLs are run one at a time
so that each one's buffers can be read in between). The hooks are removed on exit.
"""
from __future__ import annotations
import contextlib
from dataclasses import dataclass, field
import numpy as np


@dataclass
class Call:
  """One CALL of a schedule: `body` is its src[0] (a kernel SINK, or a COPY...), `buffers`
  the tinygrad Buffers bound to the body's PARAM slots 0, 1, ..., and their contents
  before (None: not allocated yet) and after the call ran."""
  index: int
  call: object
  body: object
  buffers: list
  before: list
  after: list = field(default_factory=list)
  device: str | None = None

  @property
  def kind(self) -> str: return self.body.op.name

  def program(self):
    """The lowered program of a kernel (tinygrad's `codegen.to_program`, cached by tinygrad:
    the one it compiled and ran), or None for a body that is not a kernel SINK."""
    from tinygrad import Device
    from tinygrad.uop.ops import Ops
    from tinygrad.codegen import to_program
    if self.body.op is not Ops.SINK or self.device is None: return None
    return to_program(self.body, Device[self.device].renderer)


@dataclass
class Realization:
  """One Tensor.realize: the UOps of every tensor passed to it (tensor level, in the order
  given), the contents of every BUFFER those graphs read, keyed by the BUFFER UOp (a buffer
  this realize allocates has none before it: `created`, zeros), the schedule, the values
  of the tensors and the contents of the buffers after it (`final`). `unrealized`: the positions of tensors tinygrad leaves as they are
  (a constant-only tensor has no device; a realized buffer is one already): their values
  are read as tinygrad gives them (`Tensor.numpy`)."""
  index: int
  roots: list
  inputs: dict
  calls: list = field(default_factory=list)
  outputs: list = field(default_factory=list)
  created: list = field(default_factory=list)
  unrealized: list = field(default_factory=list)
  final: dict = field(default_factory=dict)   # BUFFER UOp -> its contents after the realize


@dataclass
class Capture:
  realizations: list = field(default_factory=list)


def read_buffer(buf, shape=None) -> np.ndarray | None:
  """A tinygrad Buffer's contents as a NumPy array of the matching tinyspec dtype (a copy),
  or None when it is not allocated."""
  from tinyspec.refimpl.numeric import np_dtype
  from tinyspec.interop.tinygrad_map import dtype_name
  if buf is None: return None
  if buf.size == 0:   # nothing to read (tinygrad's NPY buffer of a zero-size array cannot even be viewed)
    return np.zeros(0 if shape is None else shape, np_dtype(dtype_name(buf.dtype)))
  if not buf.is_initialized() and buf.base is not buf and buf.base.is_initialized():
    buf.ensure_allocated()   # a view (an offset into a realized buffer) is opened lazily: its base holds the data
  if not buf.is_initialized(): return None
  a = np.frombuffer(bytes(buf.as_memoryview()), dtype=np_dtype(dtype_name(buf.dtype))).copy()
  return a if shape is None else a.reshape(shape)


def _uop_buffer(u):
  try: return u.buffer
  except Exception: return None   # noqa: BLE001 (a BUFFER without storage yet: nothing to read)


def _tensor_value(t) -> np.ndarray:
  """A realized tensor's value: its buffer, or (a view of a buffer) a copy tinygrad makes."""
  try: buf = t.uop.buffer
  except Exception: buf = None   # noqa: BLE001 (a view that is not contiguous, a tensor with no device: tinygrad copies it)
  if buf is not None and buf.size == t.numel() and (a := read_buffer(buf, t.shape)) is not None: return a
  return np.asarray(t.numpy())


def _allocated(buf):
  """buf, given its memory: tinygrad allocates a call's buffers right before it runs the call
  (a Tensor.empty buffer gets its memory there, its contents whatever that memory held), so
  allocating them a moment earlier lets the capture read what the call reads."""
  if buf is not None and not hasattr(buf, "bufs") and not buf.is_initialized(): buf.ensure_allocated()
  return buf


def _contents_first_seen(rec) -> None:
  """A buffer this realize allocated (a Tensor.empty read by the realize) has as contents what
  the first call that used it saw: they are an input of the tensor graph like any other."""
  for u in list(rec.created):
    b = _uop_buffer(u)
    seen = next((c.before[k] for c in rec.calls for k, x in enumerate(c.buffers) if x is b and isinstance(c.before[k], np.ndarray)), None)
    if seen is not None:
      rec.inputs[u] = seen
      rec.created.remove(u)


@contextlib.contextmanager
def capture():
  """Record every realize inside the block (see the module docstring)."""
  import tinygrad.tensor as tt
  from tinygrad.uop.ops import Ops, UOp
  cap = Capture()
  active: list[Realization] = []
  orig_realize, orig_run_linear = tt.Tensor.realize, tt.run_linear

  def realize(self, *lst, do_update_stats=True):
    tensors = (self,) + lst
    todo = [x for x in tensors if not x.uop.is_virtual and not x.uop.has_buffer_identity()]   # what tinygrad realizes
    if not todo or active: return orig_realize(self, *lst, do_update_stats=do_update_stats)
    roots = [t.uop for t in tensors]   # every tensor given is an output, in the order given (none dropped)
    inputs, created = {}, []
    for u in UOp.sink(*roots).toposort():
      if u.op is not Ops.BUFFER: continue
      if (a := read_buffer(_uop_buffer(u))) is not None: inputs[u] = a
      else: created.append(u)
    rec = Realization(len(cap.realizations), roots, inputs, created=created,
                      unrealized=[k for k, t in enumerate(tensors) if not any(t is x for x in todo)])
    cap.realizations.append(rec)
    active.append(rec)
    try:
      orig_realize(self, *lst, do_update_stats=do_update_stats)
    finally:
      active.pop()
    _contents_first_seen(rec)
    active.append(None)   # reading a view of a result may realize a copy: not part of the program
    try:
      rec.outputs = [_tensor_value(t) for t in tensors]
      rec.final = {u: read_buffer(_uop_buffer(u)) for u in [*inputs, *created]}
    finally:
      active.pop()
    return self

  def run_linear(linear, var_vals=None, input_uops=(), update_stats=True, jit=False, wait=False):
    if not active or active[-1] is None or jit or input_uops:
      return orig_run_linear(linear, var_vals, input_uops, update_stats=update_stats, jit=jit, wait=wait)
    rec = active[-1]
    for call in linear.src:
      bufs = [_allocated(_uop_buffer(s)) for s in call.src[1:]]
      dev = next((b.device for b in bufs if b is not None), None)
      c = Call(len(rec.calls), call, call.src[0], bufs, [read_buffer(b) for b in bufs], device=dev)
      orig_run_linear(UOp(Ops.LINEAR, src=(call,)), var_vals, update_stats=update_stats, wait=wait)
      c.after = [read_buffer(b) for b in bufs]
      rec.calls.append(c)

  tt.Tensor.realize, tt.run_linear = realize, run_linear
  try:
    yield cap
  finally:
    tt.Tensor.realize, tt.run_linear = orig_realize, orig_run_linear
