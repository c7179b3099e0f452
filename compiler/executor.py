"""Running a compiled program: storage, inputs, kernel launches, outputs.

Inputs are keyed as refimpl.evaluate keys them (tinyspec.dispatch.input_name): a BUFFER by its
arg `name` or `buf{slot}`, a top-level PARAM by `name` or `param{slot}`; a missing
input starts as zeros. Outputs: `out{k}` for a value root; when a root is a side effect,
every program buffer (or PARAM) a kernel stored to, under its input name.

Run-time checks where the compiler's proofs end: every kernel was compiled assuming each
symbolic size (a by-value PARAM with bounds) lies in its [min, max]; the caller supplies
those values, so `bind` checks every one before anything is launched -- a top-level
PARAM against its own bounds and against every kernel PARAM it is passed to (a CALL's
outer PARAM may allow more than the kernel's), a CONST argument likewise -- and refuses
with the reference evaluator's rule ids (PARAM.bounds; eval.input for a missing or
non-integer value). A size the program computes is checked the same way when it is
read, just before the kernel that needs it is launched.

Intermediate buffers live in one arena laid out by the memory plan (compiler/passes/memplan.py).
Every device of the program is the one device the kernels run on (the host for `c`, the
OpenCL device for `opencl`): an n-tuple device's buffer is held whole.
"""
from __future__ import annotations
import base64
import numpy as np
from tinyspec.uop import UOp
from tinyspec.dispatch import input_name
from tinyspec.intervals import np_dtype
from tinyspec.props import props
from tinyspec.dtypes import dtype as _dt
from tinyspec.compiler.runtime.opencl import device
from tinyspec.compiler.runtime.opencl import check_simulator
from tinyspec.compiler.runtime.c import CProgram
from tinyspec.compiler.runtime.opencl import CLProgram
from tinyspec.compiler.runtime.opencl import Built
from tinyspec.limits import default_budget
from tinyspec.compiler.errors import CompileError
from tinyspec.refimpl.engine import Machine


class InputError(ValueError):
  """Inputs the program refuses before running (rule: the reference evaluator's rule id
  for the same input; exit code 2, as for the reference)."""
  exit_code = 2

  def __init__(self, rule: str, msg: str):
    super().__init__(f"{msg} [{rule}]")
    self.rule, self.msg = rule, msg


def symbolic_value(name: str, value, dt: str) -> int:
  """The integer a symbolic size input holds (refused unless it is one integer that
  dtype dt holds exactly)."""
  a = np.asarray(value)
  if a.size != 1 or a.dtype.kind not in "iub" and not (a.dtype.kind == "f" and np.isfinite(a).all() and float(a.reshape(-1)[0]).is_integer()):
    raise InputError("eval.input", f"the symbolic size {name!r} needs one integer, not {a.dtype}{list(a.shape)}")
  v = int(a.reshape(-1)[0])
  d = _dt(dt)
  if not d.min <= v <= d.max: raise InputError("eval.input", f"the symbolic size {name!r} = {v} is not a value of {dt}")
  return v


def check_size(name: str, v: int, lo: int, hi: int):
  """A symbolic size must lie in the bounds its PARAM declares (decision: the rule ref uses)."""
  if not lo <= v <= hi: raise InputError("PARAM.bounds", f"{name} = {v} is outside its bounds [{lo}, {hi}]")


def _numel(shape) -> int:
  n = 1
  for d in shape: n *= d
  return n


def constant_data(u: UOp) -> np.ndarray:
  """The contents of a VCONST or BINARY used as data."""
  if u.op == "BINARY": return np.frombuffer(base64.b64decode(u.arg["data"]), dtype=np.uint8).copy()
  dt = props(u).dtype
  vals = [float(v) if isinstance(v, str) else v for v in u.arg["values"]]
  with np.errstate(all="ignore"):
    return np.array(vals, dtype=np.float64 if np_dtype(dt).kind == "f" or np_dtype(dt).name == "bfloat16" else None).astype(np_dtype(dt)) \
      if vals else np.zeros(0, np_dtype(dt))


def _view_base(u: UOp) -> tuple[UOp, int]:
  """(the storage under a chain of BUFFER_VIEWs, the byte offset of u into it)."""
  offset = 0
  while u.op == "BUFFER_VIEW":
    offset += u.arg["offset"]
    u = u.src[0]
  return u, offset


class HostMemory:
  """Storage for the C target: NumPy arrays."""
  def alloc(self, nbytes: int): return np.zeros(max(nbytes, 1), dtype=np.uint8)
  def view(self, base, offset: int, nbytes: int): return base[offset:offset + max(nbytes, 1)]
  def upload(self, handle, arr: np.ndarray): handle[:arr.nbytes] = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
  def download(self, handle, shape, dt: str) -> np.ndarray:
    n = _numel(shape) * np_dtype(dt).itemsize
    return handle[:n].copy().view(np_dtype(dt)).reshape(shape)
  def pointer(self, handle) -> int: return handle.ctypes.data
  def finish(self): pass


class CLMemory:
  """Storage for the OpenCL target: cl.Buffers (views are aligned sub-buffers)."""
  def __init__(self):
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
    self.cl = cl
    self.ctx, self.queue, self.dev = device()
    self.align = max(self.dev.mem_base_addr_align // 8, 1)
    self.max_alloc = int(self.dev.max_mem_alloc_size)

  def alloc(self, nbytes: int):
    buf = self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, max(nbytes, 1))
    self.cl.enqueue_fill_buffer(self.queue, buf, np.uint8(0), 0, max(nbytes, 1))
    return buf

  def view(self, base, offset: int, nbytes: int):
    if offset == 0 and nbytes >= base.size: return base
    if offset % self.align == 0: return base.get_sub_region(offset, max(nbytes, 1))
    # OpenCL sub-buffers must start aligned: an unaligned view is a scratch buffer that is
    # filled from the base before each kernel using it and written back after each one
    # that stores to it (buffer-to-buffer copies have no alignment rule)
    return _Staged(base, offset, max(nbytes, 1), self.cl.Buffer(self.ctx, self.cl.mem_flags.READ_WRITE, max(nbytes, 1)))

  def before(self, h):
    if isinstance(h, _Staged): self.cl.enqueue_copy(self.queue, h.tmp, h.base, byte_count=h.nbytes, src_offset=h.offset, dst_offset=0)
    return h.tmp if isinstance(h, _Staged) else h

  def after(self, h, written: bool):
    if isinstance(h, _Staged) and written:
      self.cl.enqueue_copy(self.queue, h.base, h.tmp, byte_count=h.nbytes, src_offset=0, dst_offset=h.offset)

  def upload(self, handle, arr: np.ndarray):
    if arr.nbytes: self.cl.enqueue_copy(self.queue, handle, np.ascontiguousarray(arr).view(np.uint8).reshape(-1))

  def download(self, handle, shape, dt: str) -> np.ndarray:
    out = np.empty(_numel(shape) * np_dtype(dt).itemsize, dtype=np.uint8)
    if isinstance(handle, _Staged): handle = self.before(handle)
    if out.nbytes: self.cl.enqueue_copy(self.queue, out, handle)
    return out.view(np_dtype(dt)).reshape(shape)

  def finish(self):
    self.queue.finish()
    check_simulator()


class _Staged:
  def __init__(self, base, offset, nbytes, tmp): self.base, self.offset, self.nbytes, self.tmp = base, offset, nbytes, tmp
  @property
  def size(self): return self.nbytes


class Executable:
  """A compiled program, ready to run any number of times."""

  def __init__(self, compiled, source: str | None = None, built=None):
    """source: the translation unit holding the kernels (default: the program's own);
    built: an OpenCL program already built from it (BEAM builds many candidates at once)."""
    self.c = compiled
    self.target = compiled.target
    src = source or compiled.program_source()
    if self.target == "c":
      self.mem = HostMemory()
      self.programs = [CProgram(ks, src) for ks in compiled.sources]
    else:
      self.mem = CLMemory()
      built = built or (Built(src) if compiled.sources else None)
      self.programs = [CLProgram(ks, shared=built) for ks in compiled.sources]

  def storages(self) -> list[UOp]:
    seen: dict[UOp, None] = {}
    for k in self.c.schedule.kernels:
      for a in k.args: seen[a] = None
    for o in self.c.schedule.outputs:
      if o.storage is not None: seen[o.storage] = None
    return list(seen)

  def run(self, inputs: dict | None = None, threads: int | None = None, cast: bool = False) -> dict[str, np.ndarray]:
    b = self.bind(inputs, threads, cast)
    b.run()
    return b.outputs()

  def bind(self, inputs: dict | None = None, threads: int | None = None, cast: bool = False) -> "Bound":
    """The program's storage for one set of inputs: inputs uploaded, intermediates in the
    arena. `Bound.run()` launches every kernel (any number of times: benchmarks and BEAM
    time it), `Bound.outputs()` reads the results back. An input whose dtype is not its
    buffer's is refused (eval.input) unless cast=True (then converted if exact, as the
    reference evaluator's cast=True)."""
    self._cast = cast
    inputs = {(input_name("BUFFER", {"slot": k}) if isinstance(k, int) else k): v for k, v in (inputs or {}).items()}
    unknown = sorted(set(inputs) - self.c.input_names)
    if unknown: raise ValueError(f"input(s) {', '.join(unknown)} name no BUFFER or PARAM of the graph (known: {', '.join(sorted(self.c.input_names)) or 'none'})")
    s = self.c.schedule
    mem = self.mem
    plan = s.meta.get("memory", {"buffers": {}, "arena": 0})
    storages = self.storages()
    self._check_memory(plan, storages)
    arena = mem.alloc(plan["arena"]) if plan["arena"] else None
    handles: dict[UOp, object] = {}
    vals: dict[UOp, int] = {}
    for u in storages:
      pr = props(u)
      nbytes = _numel(pr.shape) * np_dtype(pr.dtype).itemsize
      if u in s.intermediates:
        off, size = plan["buffers"][u.arg["slot"]]
        handles[u] = mem.view(arena, off, size)
      elif u.op == "BUFFER_VIEW":
        base, offset = _view_base(u)   # a view of a view is a view of the storage below both
        if base not in handles: handles[base] = self._input(base, inputs)
        handles[u] = mem.view(handles[base], offset, nbytes)
      elif u.op in ("VCONST", "BINARY"):
        h = mem.alloc(nbytes); mem.upload(h, constant_data(u)); handles[u] = h
      elif u.op == "PARAM" and len(u.src) == 3:
        name = input_name(u.op, u.arg)
        if name not in inputs: raise InputError("eval.input", f"the symbolic size {name!r} needs a value (an input)")
        vals[u] = symbolic_value(name, inputs[name], props(u).dtype)
        check_size(name, vals[u], *props(u).min_max)
      elif u.op == "CONST":
        vals[u] = int(u.arg["value"])
      elif u not in handles:   # (a view listed before its base has bound the base already: one storage, bound once)
        handles[u] = self._input(u, inputs)
    launches = []
    for k, prog in zip(s.kernels, self.programs):
      args = [handles.get(a) if a not in vals else None for a in k.args]
      computed = {slot: args[slot] for slot in prog.ks.bounds if k.args[slot] not in vals}
      v = [vals.get(a, 0) for a in k.args]
      for slot, (lo, hi) in prog.ks.bounds.items():   # every size is known now: checked before any launch
        if slot not in computed: check_size(_size_name(k, slot), v[slot], lo, hi)
      launches.append(self._launch(prog, k, args, v, computed, threads))
    return Bound(self, handles, vals, launches, arena)

  def _check_memory(self, plan, storages) -> None:
    """Refuse (rule run.budget, or run.device past the OpenCL device's largest buffer) a
    program whose buffers would not fit, before allocating any of them."""
    sizes = [plan["arena"]]
    for u in storages:
      if u in self.c.schedule.intermediates or u.op == "BUFFER_VIEW" or (u.op == "PARAM" and len(u.src) == 3): continue
      pr = props(u)
      sizes.append(_numel(pr.shape) * np_dtype(pr.dtype).itemsize)
    total = sum(sizes)
    try: budget = default_budget()
    except ValueError as e: raise CompileError("run.budget", f"TINYSPEC_EVAL_BUDGET: {e}") from None
    if total > budget:
      raise CompileError("run.budget", f"the program's buffers need {total:,} bytes, over the memory budget of {budget:,} bytes "
                                       "(TINYSPEC_EVAL_BUDGET)")
    largest = getattr(self.mem, "max_alloc", None)
    if largest is not None and max(sizes) > largest:
      raise CompileError("run.device", f"a buffer of {max(sizes):,} bytes, over the OpenCL device's largest allocation ({largest:,} bytes)")

  def _launch(self, prog, k, args, v, computed: dict, threads):
    """The launch of one kernel; sizes the program computes (`computed`: slot -> the
    storage holding one) are read and checked right before it."""
    mem = self.mem
    def fixed(vv):
      if self.target == "c": return prog.bind([mem.pointer(h) if h is not None else 0 for h in args], vv, threads)
      def launch():
        prog([mem.before(h) if h is not None else None for h in args], vv)
        for slot, h in enumerate(args): mem.after(h, slot in k.writes)
      return launch
    if not computed: return fixed(v)
    def launch():
      vv = list(v)
      for slot, h in computed.items():
        mem.finish()
        vv[slot] = int(mem.download(h, (), prog.ks.params[slot][1]).reshape(()))
        check_size(_size_name(k, slot), vv[slot], *prog.ks.bounds[slot])
      fixed(vv)()
    return launch

  def _input(self, u: UOp, inputs: dict):
    pr = props(u)
    nbytes = _numel(pr.shape) * np_dtype(pr.dtype).itemsize
    h = self.mem.alloc(nbytes)
    name = input_name(u.op, u.arg)
    if name in inputs:
      arr = np.asarray(inputs[name])
      if arr.dtype.names is not None or arr.dtype.hasobject or arr.dtype.kind not in "biuf" + ("V" if pr.dtype == "bfloat16" else ""):
        raise ValueError(f"input {name}: dtype {arr.dtype} is not a plain bool, integer or float dtype")
      if arr.shape != tuple(pr.shape):
        if arr.size != _numel(pr.shape): raise ValueError(f"input {name}: shape {arr.shape}, the graph's {u.op} has shape {tuple(pr.shape)}")
        arr = arr.reshape(pr.shape)
      if arr.dtype != np_dtype(pr.dtype): arr = self._converted(name, u.op, arr, pr.dtype, isinstance(inputs[name], (np.ndarray, np.generic)))
      self.mem.upload(h, arr)
    return h


  def _converted(self, name: str, op: str, arr, dtype: str, typed: bool):
    """arr as `dtype` when every value converts exactly and cast=True was given or the input
    had no dtype of its own (`typed` False: a list, a Python number); else refused."""
    if typed and not getattr(self, "_cast", False):
      raise InputError("eval.input", f"input {name!r} has dtype {arr.dtype}, the graph's {op} is {dtype}: convert it, or allow an "
                                     "exact conversion (cast=True, --cast)")
    out = Machine._convert(arr, np_dtype(dtype))
    if out is None: raise InputError("eval.input", f"input {name!r} has dtype {arr.dtype}, the graph's {op} is {dtype}, and the values do not convert exactly")
    return out


def _size_name(k, slot: int) -> str:
  """How a kernel's symbolic size is named in a refusal (as the reference names a
  kernel PARAM: param{slot})."""
  return input_name("PARAM", {"slot": slot})


class Bound:
  """A program with its storage bound (Executable.bind)."""
  def __init__(self, ex: Executable, handles: dict, vals: dict, launches: list, arena):
    self.ex, self.handles, self.vals, self.launches, self.arena = ex, handles, vals, launches, arena

  def run(self):
    """Launch every kernel in order and wait for the device."""
    for f in self.launches: f()
    self.ex.mem.finish()

  def outputs(self) -> dict[str, np.ndarray]:
    s, mem, handles, vals = self.ex.c.schedule, self.ex.mem, self.handles, self.vals
    out: dict[str, np.ndarray] = {}
    for n, o in enumerate(s.outputs):
      if o.kind == "value":
        pr = props(o.storage)
        out[o.name or f"out{n}"] = np.asarray(vals[o.storage], dtype=np_dtype(pr.dtype)) if o.storage in vals else mem.download(handles[o.storage], pr.shape, pr.dtype)
    if any(o.kind == "void" for o in s.outputs):
      for k in s.kernels:
        for slot in k.writes:
          a = _view_base(k.args[slot])[0]   # a store through a view writes its base buffer: that is the output
          if a in s.intermediates or a.op not in ("BUFFER", "PARAM"): continue
          pr = props(a)
          out[input_name(a.op, a.arg)] = mem.download(handles[a], pr.shape, pr.dtype)
    return out
