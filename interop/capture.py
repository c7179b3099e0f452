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

The capture never changes what tinygrad does: it reads buffers directly (never through
`Tensor.numpy`, which TinyJit forbids while it captures), and where it cannot read a value
it records why (`Realization.limitation`) instead of failing the program:
- inside a TinyJit capture tinygrad only records the schedule and runs it after the
  capture: the realize's inputs are read when it is made, its values after the JIT's
  first run (`jit=True`; see `_JitRealizes` for when that is not what the realize saw);
  a JIT replay runs no realize and is not recorded;
- a multi-device buffer (MultiBuffer) reads as its shards one after another in device
  order, and a CALL over them is recorded once per device (what each device ran);
- a NULL-device buffer has no contents (tinygrad's NULL device runs nothing), and a TINYFS
  buffer is remote storage: reading it would be a request to its server;
- a buffer whose read raises in tinygrad is left unread with the error (the program goes on
  as it would without the capture);
- a buffer tinygrad never allocated (a realized `Tensor.empty`) has no contents either: it is
  not read (reading it would allocate it, and TinyJit takes an allocated buffer for an input).

It only looks up the Buffers tinygrad made (`known_buffer`, never `UOp.buffer`, which makes
and registers one, and a registered BUFFER is one TinyJit's memory planner must not plan),
and reads them without allocating anything (`read_buffer`).
"""
from __future__ import annotations
import contextlib
import math
from dataclasses import dataclass, field
from pathlib import Path
import numpy as np
from tinyspec.intervals import np_dtype
from tinyspec.interop.tinygrad_map import dtype_name
from tinyspec.interop.tinygrad_assign import stored_buffers

NULL_DEVICE = "a NULL-device buffer has no contents (tinygrad's NULL device allocates no memory and runs nothing)"
TINYFS_DEVICE = ("a buffer on tinygrad's TINYFS device is remote storage, not memory: reading it is a request to the storage "
                 "server the program never made (a STORE buffer gives back the hashes of what was stored, a LOAD buffer "
                 "fetches chunks), so it is not read")
_NOT_READ = {"NULL": NULL_DEVICE, "TINYFS": TINYFS_DEVICE}   # device kinds whose buffers have no contents to read
READ_RAISED = "reading the buffer raised in tinygrad, so it is left unread"
NEVER_ALLOCATED = ("a buffer tinygrad never allocated (a realized Tensor.empty) has no contents; reading it would allocate it, "
                   "and TinyJit takes an allocated buffer for an input")
JIT_ARENA = ("inside a TinyJit capture, a buffer that no tensor outside the JIT holds is placed by tinygrad's memory planner "
             "in the JIT's arena: it has no Buffer of its own to read after the JIT's first run")
SYMBOLIC_SHAPE = "a tensor of a symbolic shape (a bound Variable) that is not one whole buffer: Tensor.numpy refuses it"
JIT_VIEW = ("inside a TinyJit capture, a result that is a view of a buffer, not the whole buffer, is not read: tinygrad "
            "forbids Tensor.numpy while TinyJit captures")
REALIZE_RAISED = "tinygrad raised in the realize (a test may expect it: a DISK file it cannot open), so it gave no values"
JIT_ABANDONED = ("inside a TinyJit capture that tinygrad abandoned (it raised before the JIT's first run): the captured "
                 "schedule never ran, so there are no values")


@dataclass(frozen=True)
class Unreadable:
  """A buffer the capture cannot read, and why."""
  reason: str


@dataclass
class Call:
  """One CALL of a schedule as one device ran it: `body` is its src[0] (a kernel SINK, or a
  COPY...), `buffers` the tinygrad Buffers bound to the body's PARAM slots 0, 1, ..., and
  their contents before (None: not allocated yet) and after the call ran; `var_vals` the
  values of the schedule's bound variables (and of `_device_num` on a multi-device call);
  `shard`: the device's position on a multi-device call, else None; `lowering`: tinygrad's
  context when it lowered the call (`lowering_context`: EMULATED_DTYPES, NOOPT, BEAM ...)."""
  index: int
  call: object
  body: object
  buffers: list
  before: list
  after: list = field(default_factory=list)
  device: str | None = None
  var_vals: dict = field(default_factory=dict)
  shard: int | None = None
  lowering: dict = field(default_factory=dict)

  @property
  def kind(self) -> str: return self.body.op.name

  @property
  def limitation(self) -> str:
    """Why the call's buffers cannot be judged ('' when they can)."""
    return next((a.reason for a in [*self.before, *self.after] if isinstance(a, Unreadable)), "")

  def program(self):
    """The lowered program of a kernel, or None for a body that is not a kernel SINK: tinygrad's
    `codegen.to_program` in the context tinygrad lowered the call in (`lowering`), with the BEAM
    it gave the kernel (its `pm_beam`), so it is the program tinygrad compiled and ran (its
    cached one). Lowered in another context it would be another program: outside a test's
    `Context(EMULATED_DTYPES="bfloat16")` the renderer emits `__bf16` where the run emulated it."""
    from tinygrad import Device  # noqa: PLC0415 (tinygrad, an optional dependency)
    from tinygrad.helpers import Context  # noqa: PLC0415 (tinygrad, an optional dependency)
    from tinygrad.uop.ops import Ops, UOp, graph_rewrite  # noqa: PLC0415 (tinygrad, an optional dependency)
    from tinygrad.codegen import to_program  # noqa: PLC0415 (tinygrad, an optional dependency)
    from tinygrad.engine.realize import pm_beam  # noqa: PLC0415 (tinygrad, an optional dependency)
    if self.body.op is not Ops.SINK or self.device is None: return None
    with Context(**self.lowering):
      ast, beam = self.body, self.lowering.get("BEAM", 0)
      if beam >= 1: ast = graph_rewrite(UOp(Ops.LINEAR, src=(self.call,)), pm_beam, ctx=beam, walk=True).src[0].src[0]
      return to_program(ast, Device[self.device].renderer)


def lowering_context() -> dict:
  """tinygrad's context for lowering a kernel, as its own `lower_and_compile` hands it to its
  compile workers (`to_program_context`: the ContextVars that change a lowered program), with
  BEAM, which its `compile_linear` reads: name -> value, for `Context(**...)`."""
  from tinygrad.codegen import to_program_context  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.helpers import BEAM  # noqa: PLC0415 (tinygrad, an optional dependency)
  return {v.key: v.value for v in (*to_program_context, BEAM)}


@dataclass
class Realization:
  """One Tensor.realize: the UOps of every tensor passed to it (tensor level, in the order
  given), the contents of every BUFFER those graphs read, keyed by the BUFFER UOp (a buffer
  this realize allocates has none before it: `created`, zeros), the schedule, the values
  of the tensors and the contents of the buffers after it (`final`). `unrealized`: the positions of tensors tinygrad leaves as they are
  (a constant-only tensor has no device; a realized buffer is one already): their values
  are read as tinygrad gives them (`Tensor.numpy`). `var_vals`: the bound variables' values
  (name -> int). `limitation`: why the realize's values cannot be judged ('' when they can).
  `jit`: made inside a TinyJit capture (its schedule ran after it, not recorded here).
  `unread`: the positions of outputs left unread, each with why (a buffer tinygrad never allocated)."""
  index: int
  roots: list
  inputs: dict
  calls: list = field(default_factory=list)
  outputs: list = field(default_factory=list)
  created: list = field(default_factory=list)
  unrealized: list = field(default_factory=list)
  final: dict = field(default_factory=dict)   # BUFFER UOp -> its contents after the realize
  var_vals: dict = field(default_factory=dict)
  limitation: str = ""
  jit: bool = False
  unread: dict = field(default_factory=dict)
  default_float: str | None = None   # tinyspec's name of tinygrad's DEFAULT_FLOAT at the realize (a weak float's dtype)


@dataclass
class Capture:
  realizations: list = field(default_factory=list)


def read_buffer(buf, shape=None) -> np.ndarray | Unreadable | None:
  """A tinygrad Buffer's contents as a NumPy array of the matching tinyspec dtype (a copy),
  None when it is not allocated, or Unreadable (a NULL-device buffer). A MultiBuffer reads
  as its shards one after another (device order); shape then gives one shard's shape.
  Nothing is allocated: a view that is not opened yet is read from its base's bytes."""
  if buf is None: return None
  if hasattr(buf, "bufs"):   # a MultiBuffer: one Buffer per device
    shards = [read_buffer(b, shape) for b in buf.bufs]
    if bad := next((s for s in shards if isinstance(s, Unreadable)), None): return bad
    return None if any(s is None for s in shards) else np.concatenate([np.atleast_1d(s) for s in shards])
  if (no_contents := _device_not_read(buf.device)) is not None: return no_contents
  if buf.size == 0:   # nothing to read (tinygrad's NPY buffer of a zero-size array cannot even be viewed)
    return np.zeros(0 if shape is None else shape, storage_dtype(buf.dtype))
  if not buf.is_allocated(): return None
  try:
    if buf.is_initialized(): data = bytes(buf.as_memoryview())
    else: data = bytes(buf.base.as_memoryview()[buf.offset:buf.offset + buf.nbytes])   # opening the view would count as one of its base's
  except Exception as e:   # noqa: BLE001 (a device's copyout the capture cannot use must not fail the program)
    return Unreadable(f"{READ_RAISED} ({_error_text(e)})")
  a = np.frombuffer(data, dtype=storage_dtype(buf.dtype)).copy()
  return a if shape is None else a.reshape(shape)


def disk_contents(u) -> np.ndarray | None:
  """The contents of a BUFFER u on tinygrad's DISK device that tinygrad has not opened yet: the
  bytes its DiskDevice will map, read from the file without opening it for tinygrad (its mmap
  extends a shorter or missing file with zeros; "shm:NAME" is POSIX shared memory). None for
  another device, or a file that cannot be read (the buffer is then one this realize creates)."""
  device = str(u.device)
  if not device.upper().startswith("DISK:") or not all(isinstance(d, int) for d in u.shape): return None
  name = device[len("DISK:"):]
  path = Path("/dev/shm") / name[len("shm:"):].lstrip("/") if name.startswith("shm:") else Path(name)
  nbytes = math.prod(u.shape) * u.dtype.itemsize
  try:
    with open(path, "rb") as f: data = f.read(nbytes)
  except FileNotFoundError: data = b""
  except OSError: return None
  return np.frombuffer(data.ljust(nbytes, b"\0"), storage_dtype(u.dtype)).copy()


def _error_text(e: BaseException) -> str:
  """tinygrad's error as a reason: its type and first line, bounded."""
  return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:240]


def _device_not_read(device) -> Unreadable | None:
  """Unreadable for a device (a name, or a tuple of them) whose buffers the capture does not read."""
  for d in device if isinstance(device, tuple) else (device,):
    if d is not None and (why := _NOT_READ.get(str(d).split(":")[0].upper())) is not None: return Unreadable(why)
  return None


def storage_dtype(dt) -> np.dtype:
  """The NumPy dtype a buffer of tinygrad dtype dt is read as: its tinyspec dtype's, or for a
  dtype tinyspec has none for (tinygrad's internal uint128/uint256), the unsigned integer of
  its size, its bits as they are. The capture reads every buffer it meets (it must not fail
  the program it watches); a graph holding such a dtype does not import (the map leaves it
  unmapped). A lowered program that emulates a dtype (EMULATED_DTYPES: fp8 as uint8 storage)
  holds the storage dtype itself."""
  return np_dtype(name) if (name := dtype_name(dt)) is not None else np.dtype(f"u{dt.itemsize}")


_FORWARDS_BUFFER = ("CONTIGUOUS", "CONTIGUOUS_BACKWARD", "RESHAPE", "UNSHARD", "DETACH", "AFTER")   # UOp.buffer's: src[0]'s buffer


def known_buffer(u):
  """The Buffer (or MultiBuffer) tinygrad holds for UOp u, found as `UOp.buffer` finds it,
  or None where tinygrad has made none: unlike `UOp.buffer` it makes and registers nothing."""
  from tinygrad.uop.ops import Ops, buffers  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.device import MultiBuffer  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.helpers import prod  # noqa: PLC0415 (tinygrad, an optional dependency)
  while u.op.name in _FORWARDS_BUFFER: u = u.src[0]
  if (b := buffers.get(u)) is not None: return b
  if u.op is Ops.MSELECT: return None if (m := known_buffer(u.src[0])) is None else m.bufs[u.arg]
  if u.op is Ops.MSTACK:
    parts = [known_buffer(x) for x in u.src]
    if any(p is None for p in parts): return None
    (m := MultiBuffer.__new__(MultiBuffer)).bufs = parts
    return m
  if u.op is Ops.BUFFER or (u is u.base and u.op is not Ops.BITCAST): return None
  try: cv = u.contiguous_view()
  except Exception: return None   # noqa: BLE001 (a view tinygrad cannot open either)
  if cv is None or (base := known_buffer(cv[0].base)) is None: return None
  view = lambda b: b.view(prod(u.max_shape), u.dtype, cv[1] * cv[0].dtype.itemsize)   # an unregistered, unopened view Buffer
  if hasattr(base, "bufs"):
    (m := MultiBuffer.__new__(MultiBuffer)).bufs = [view(b) for b in base.bufs]
    return m
  return view(base)


def _is_variable(u) -> bool:
  """tinygrad 0.14's Variable: a BUFFER whose ParamArg is in address space ALU (a scalar, not storage)."""
  sp = getattr(u.arg, "addrspace", None)
  return sp is not None and sp.name == "ALU"


def _bindings(roots) -> dict:
  """The variables bound in the tensor graphs: tinygrad 0.14 binds Variable v to n as
  AFTER(v, STORE(v, CONST n))."""
  from tinygrad.uop.ops import Ops, UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  out = {}
  for u in UOp.sink(*roots).toposort():
    if u.op is Ops.STORE and _is_variable(u.src[0]) and u.src[1].op is Ops.CONST and u.src[0].arg.name is not None:
      out[str(u.src[0].arg.name)] = int(u.src[1].arg)
  return out


def _tensor_value(t, jit: bool = False):
  """A realized tensor's value: its buffer, or (a view of a buffer) a copy tinygrad makes;
  Unreadable on a device whose buffers are not read (NULL, TINYFS) or where reading raised;
  None where tinygrad never made or allocated the buffer (a realized Tensor.empty: reading it
  would allocate it, and TinyJit takes an allocated buffer for an input), where the shape is
  symbolic, or inside a TinyJit capture where it is not there."""
  if (no_contents := _device_not_read(t.device)) is not None: return no_contents
  if not all(isinstance(d, int) for d in t.shape): return None
  if _unallocated(t.uop): return _closed_disk_value(t.uop, t.shape)
  buf = known_buffer(t.uop)
  if buf is not None and not hasattr(buf, "bufs") and buf.size == t.numel():
    if isinstance(a := read_buffer(buf, t.shape), (np.ndarray, Unreadable)): return a
  if jit: return None   # TinyJit forbids Tensor.numpy while it captures
  try: return _quietly(lambda: np.asarray(t.numpy()))
  except Exception as e:   # noqa: BLE001 (a view tinygrad cannot read, a strided DISK one: the program may never read it)
    return Unreadable(f"{READ_RAISED} ({_error_text(e)})")


def _closed_disk_value(u, shape) -> np.ndarray | None:
  """The value of a tensor that is a whole DISK buffer tinygrad has closed (it unmaps a file
  when the last user is done): the file's bytes are its contents. None for anything else."""
  while u.op.name in _FORWARDS_BUFFER: u = u.src[0]
  if u.op.name != "BUFFER" or (a := disk_contents(u)) is None or a.size != math.prod(shape): return None
  return a.reshape(shape)


def _unallocated(u) -> bool:
  """u is a buffer (or a view of one) whose buffer tinygrad has not made or not allocated."""
  from tinygrad.uop.ops import Ops  # noqa: PLC0415 (tinygrad, an optional dependency)
  return u.base.op is Ops.BUFFER and ((buf := known_buffer(u.base)) is None or not buf.is_allocated())


def _why_unread(u, shape, jit: bool = False) -> str | None:
  """Why the value of a realized tensor (its UOp u after the realize) was left unread, where the capture knows."""
  if _unallocated(u): return JIT_ARENA if jit and known_buffer(u.base) is None else NEVER_ALLOCATED
  if not all(isinstance(d, int) for d in shape): return SYMBOLIC_SHAPE
  return JIT_VIEW if jit else None


def _quietly(read):
  """read() with tinygrad's kernel and traffic counters left as they were: the kernels tinygrad
  runs to copy a value out are the capture's, not the program's (tests count kernels)."""
  from tinygrad.helpers import GlobalCounters as gc  # noqa: PLC0415 (tinygrad, an optional dependency)
  saved = gc.global_ops, gc.global_mem, gc.time_sum_s, gc.kernel_count
  try: return read()
  finally: gc.global_ops, gc.global_mem, gc.time_sum_s, gc.kernel_count = saved


def _unshard(bufs: list, var_vals: dict, body) -> list[tuple[list, dict, int | None]]:
  """(the Buffers one device ran with, its var_vals, its position) for each device of a call
  (tinygrad's `unwrap_multi`): a call over MultiBuffers runs once per device, binding
  `_device_num` to the device's position where the kernel uses it."""
  from tinygrad.uop.ops import Ops, AxisType  # noqa: PLC0415 (tinygrad, an optional dependency)
  if not any(hasattr(b, "bufs") for b in bufs): return [(bufs, dict(var_vals), None)]
  dnum = any((x.op is Ops.RANGE and x.arg[-1] is AxisType.DEVICE) or (x.op is Ops.PARAM and getattr(x.arg, "name", None) == "_device_num")
             for x in body.toposort())
  n = max(len(b.bufs) for b in bufs if hasattr(b, "bufs"))
  return [([b.bufs[j] if hasattr(b, "bufs") else b for b in bufs], {**var_vals, **({"_device_num": j} if dnum else {})}, j)
          for j in range(n)]


def _shard_of(contents, buf, j: int | None):
  """Device j's part of contents read from a whole (Multi)Buffer: the shards are read one
  after another in device order, each the size of buf (device j's Buffer)."""
  if j is None or not isinstance(contents, np.ndarray) or buf is None or contents.size == buf.size: return contents
  return contents[j * buf.size:(j + 1) * buf.size]


class _JitRealizes:
  """The realizes made inside one TinyJit capture. tinygrad runs none of them then: it
  records their schedules and runs them together after the capture (the JIT's first run),
  so a realize's inputs are read when it is made (nothing of the JIT has run yet) and its
  values after that run. Neither holds where the realizes of one capture touch the same
  buffers: a realize that reads what an earlier one writes saw contents that are not there
  when it is made, and a realize whose buffers a later one writes again is read after that
  write. Those are recorded as a limitation, not judged."""
  REASON = ("inside a TinyJit capture, {what} another realize of the same capture writes; tinygrad runs the captured "
            "schedules only after the capture, so the contents this realize {saw} cannot be read")

  def __init__(self): self.pending: list[tuple[Realization, list, set, set, object]] = []

  def add(self, rec: Realization, tensors, jit) -> None:
    """Hold rec (made while TinyJit jit captures) until jit's first run. A buffer it reads is
    one it was given contents of or one with none yet (`created`: an earlier realize of the
    capture may be what fills it, as TinyJit defers every run); it writes the buffers it
    stores into, those it creates, and those tinygrad made for its results (after the
    realize, each tensor is a view of its buffer; a result that was a view already is read)."""
    reads = set(rec.inputs) | set(rec.created)
    filled = {u for _, _, _, p_writes, _ in self.pending for u in p_writes} & reads   # not made here: written before
    writes = (set(rec.created) - filled) | set(stored_buffers(rec.roots).values()) | (_result_buffers(tensors) - reads)
    for prev, _, _, p_writes, _ in self.pending:
      if reads & p_writes and not rec.limitation: rec.limitation = self.REASON.format(what="it reads a buffer that", saw="saw")
      if writes & p_writes and not prev.limitation: prev.limitation = self.REASON.format(what="a buffer it writes", saw="left")
    outs = [(t.uop, t.shape, t.numel()) for t in tensors]   # UOps, not the Tensors: a live Tensor would change TinyJit's memory plan
    self.pending.append((rec, outs, reads, writes, jit))

  def finish(self, linear) -> None:
    """Read the values of the realizes of the JIT whose first run, of linear, has just finished."""
    done = [p for p in self.pending if p[4].captured is not None and p[4].captured.linear is linear]
    for rec, outs, _, writes, _ in done:
      rec.outputs = [_uop_value(u, shape, n) for u, shape, n in outs]
      rec.unread = {k: why for k, (u, shape, _) in enumerate(outs) if rec.outputs[k] is None and (why := _why_unread(u, shape, jit=True))}
      rec.final = {u: a for u in writes if isinstance(a := read_buffer(known_buffer(u)), np.ndarray)}
      if rec.unread and len(rec.unread) == len(outs) and not rec.final and not rec.limitation:
        rec.limitation = next(iter(rec.unread.values()))   # nothing of tinygrad's to compare
    self.pending = [p for p in self.pending if not any(p is d for d in done)]

  def abandon(self) -> None:
    """The realizes still pending belong to captures that never ran (tinygrad raised)."""
    for rec, *_ in self.pending: rec.limitation = rec.limitation or JIT_ABANDONED
    self.pending = []


def _result_buffers(tensors) -> set:
  """The BUFFER UOps the realized tensors are views of (after the realize)."""
  from tinygrad.uop.ops import Ops  # noqa: PLC0415 (tinygrad, an optional dependency)
  return {x for t in tensors for x in t.uop.toposort() if x.op is Ops.BUFFER and not _is_variable(x)}


def _uop_value(u, shape, numel):
  """The value of a realized tensor's UOp when it is a whole buffer (None: not read)."""
  buf = known_buffer(u)
  if buf is None or hasattr(buf, "bufs") or buf.size != numel: return None
  a = read_buffer(buf, shape)
  return a if isinstance(a, np.ndarray) else None


def _call_buffer(u):
  """The Buffer of a call's argument u, made as tinygrad's run_linear makes it (`UOp.buffer`,
  in unwrap_multi) a moment before it runs the call: asked for here, it is the same Buffer."""
  try: return u.buffer
  except Exception: return None   # noqa: BLE001 (an argument with no storage: nothing to read)


def _allocated(buf):
  """buf, given its memory: tinygrad allocates a call's buffers right before it runs the call
  (a Tensor.empty buffer gets its memory there, its contents whatever that memory held), so
  allocating them a moment earlier lets the capture read what the call reads (a multi-device
  buffer: each device's, where the kernel may leave elements unwritten: a symbolic size)."""
  for b in ([] if buf is None else getattr(buf, "bufs", [buf])):
    if not b.is_initialized(): b.ensure_allocated()
  return buf


def _contents_first_seen(rec) -> None:
  """A buffer this realize allocated (a Tensor.empty read by the realize) has as contents what
  the first call that used it saw: they are an input of the tensor graph like any other."""
  for u in list(rec.created):
    b = known_buffer(u)
    seen = next((c.before[k] for c in rec.calls for k, x in enumerate(c.buffers) if x is b and isinstance(c.before[k], np.ndarray)), None)
    if seen is not None:
      rec.inputs[u] = seen
      rec.created.remove(u)


@contextlib.contextmanager
def capture():
  """Record every realize inside the block (see the module docstring)."""
  import tinygrad.tensor as tt  # noqa: PLC0415 (tinygrad, an optional dependency)
  import tinygrad.engine.jit as tj  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.engine.realize import capturing  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.helpers import CAPTURING  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.dtype import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  from tinygrad.uop.ops import Ops, UOp  # noqa: PLC0415 (tinygrad, an optional dependency)
  cap = Capture()
  active: list[Realization | None] = []
  jits = _JitRealizes()
  orig_realize, orig_run_linear = tt.Tensor.realize, tt.run_linear

  def realize(self, *lst, do_update_stats=True):
    tensors = (self,) + lst
    todo = [x for x in tensors if not x.uop.is_virtual and not x.uop.has_buffer_identity()]   # what tinygrad realizes
    if not todo or active: return orig_realize(self, *lst, do_update_stats=do_update_stats)
    roots = [t.uop for t in tensors]   # every tensor given is an output, in the order given (none dropped)
    rec = Realization(len(cap.realizations), roots, {}, var_vals=_bindings(roots), jit=bool(capturing) and bool(CAPTURING),
                      unrealized=[k for k, t in enumerate(tensors) if not any(t is x for x in todo)])
    for u in UOp.sink(*roots).toposort():
      if u.op is not Ops.BUFFER or _is_variable(u): continue
      a = read_buffer(known_buffer(u))
      if isinstance(a, Unreadable): rec.limitation = rec.limitation or a.reason
      elif a is not None: rec.inputs[u] = a
      elif (d := disk_contents(u)) is not None: rec.inputs[u] = d
      else: rec.created.append(u)
    rec.default_float = dtype_name(dtypes.default_float)
    cap.realizations.append(rec)
    active.append(rec)
    try:
      orig_realize(self, *lst, do_update_stats=do_update_stats)
    except Exception as e:
      rec.limitation = rec.limitation or f"{REALIZE_RAISED} ({_error_text(e)})"
      raise
    finally:
      active.pop()
    if rec.jit:
      jits.add(rec, tensors, capturing[0])
      return self
    _contents_first_seen(rec)
    active.append(None)   # reading a view of a result may realize a copy: not part of the program
    try:
      _read_results(rec, tensors)
    finally:
      active.pop()
    return self

  def run_linear(linear, var_vals=None, input_uops=(), update_stats=True, jit=False, wait=False):
    if not active or active[-1] is None or jit or input_uops:
      return orig_run_linear(linear, var_vals, input_uops, update_stats=update_stats, jit=jit, wait=wait)
    rec = active[-1]
    rec.var_vals.update(var_vals or {})
    lowering = lowering_context()   # tinygrad lowers the calls below in it (the test's Context, its environment)
    for call in linear.src:
      before = [read_buffer(_allocated(_call_buffer(s))) for s in call.src[1:]]
      orig_run_linear(UOp(Ops.LINEAR, src=(call,)), var_vals, update_stats=update_stats, wait=wait)
      per_device = _unshard([known_buffer(s) for s in call.src[1:]], rec.var_vals, call.src[0])
      for bs, vals, j in per_device:
        pre = [_shard_of(a, b, j) for a, b in zip(before, bs)]
        dev = next((b.device for b in bs if b is not None), None)
        rec.calls.append(Call(len(rec.calls), call, call.src[0], bs, pre, [read_buffer(b) for b in bs], dev, vals, j, lowering))

  def jit_run_linear(*args, **kwargs):   # TinyJit's runs of what it captured (engine/jit.py's own name for run_linear)
    ret = orig_jit_run_linear(*args, **kwargs)
    if jits.pending and kwargs.get("jit"): jits.finish(args[0] if args else kwargs.get("linear"))   # the first run after a capture
    return ret

  orig_jit_run_linear = tj.run_linear
  tt.Tensor.realize, tt.run_linear, tj.run_linear = realize, run_linear, jit_run_linear
  try:
    yield cap
  finally:
    jits.abandon()
    tt.Tensor.realize, tt.run_linear, tj.run_linear = orig_realize, orig_run_linear, orig_jit_run_linear


def _read_results(rec: Realization, tensors) -> None:
  """The realized tensors' values and the contents of the realize's buffers after it."""
  values = [_tensor_value(t) for t in tensors]
  device_wide = set(_NOT_READ.values())   # a device with no contents: nothing of the realize can be judged
  if not rec.limitation: rec.limitation = next((v.reason for v in values if isinstance(v, Unreadable) and v.reason in device_wide), "")
  rec.outputs = [v if isinstance(v, np.ndarray) else None for v in values]
  rec.unread = {k: why for k, t in enumerate(tensors) if rec.outputs[k] is None
                and (why := values[k].reason if isinstance(values[k], Unreadable) else _why_unread(t.uop, t.shape))}
  rec.final = {u: a for u in [*rec.inputs, *rec.created] if isinstance(a := read_buffer(known_buffer(u)), np.ndarray)}
