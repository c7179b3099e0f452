"""The OpenCL runtime through pyopencl (PoCL on a CPU here; any platform works).

POCL_CACHE_DIR is pointed into the tinyspec cache before pyopencl is imported, so PoCL
keeps its compiled kernels there too; pyopencl's own binary cache (keyed by source and
options) lives in the same directory. The device: TINYSPEC_OPENCL_DEVICE is
"P:D" (platform and device indices) or a substring of the device name; default the first
device of the first platform. "table:NAME" names a device described by a table
(compiler/device.py table_device): programs compile for it and run on the default device
(PoCL runs programs compiled for an H100's table: their results are checked here).
"""
from __future__ import annotations
import os
from functools import lru_cache
from tinyspec.compiler.runtime.cache import cache_dir, digest, fetch, store
from tinyspec.compiler.tables import render_tables

os.environ.setdefault("POCL_CACHE_DIR", str(cache_dir("pocl")))   # (the private temporary cache when the configured one is unsafe)


class OpenCLUnavailable(RuntimeError):
  pass


@lru_cache(maxsize=None)
def device():
  """(context, queue, device) of the selected OpenCL device."""
  try:
    import pyopencl as cl
  except ImportError as e:
    raise OpenCLUnavailable(f"pyopencl is not installed ({e}); pip install 'pyopencl[pocl]'") from None
  try:
    plats = cl.get_platforms()
  except cl.Error as e:
    raise OpenCLUnavailable(f"no OpenCL platform: {e}") from None
  devs = [(p, d) for p in plats for d in p.get_devices()]
  if not devs: raise OpenCLUnavailable("no OpenCL device")
  want = os.environ.get("TINYSPEC_OPENCL_DEVICE", "")
  if want.startswith("table:"): want = ""    # compiled for a table's device, run on the default one
  pick = devs[0][1]
  if want:
    if ":" in want and all(x.isdigit() for x in want.split(":", 1)):
      pi, di = (int(x) for x in want.split(":", 1))
      try: pick = plats[pi].get_devices()[di]
      except IndexError: raise OpenCLUnavailable(f"TINYSPEC_OPENCL_DEVICE={want}: no such device") from None
    else:
      hits = [d for _, d in devs if want.lower() in d.name.lower()]
      if not hits: raise OpenCLUnavailable(f"TINYSPEC_OPENCL_DEVICE={want}: no device name contains it")
      pick = hits[0]
  ctx = cl.Context([pick])
  q = cl.CommandQueue(ctx)
  _warm_up(cl, ctx, q, pick)
  return ctx, q, pick


_WARM = "__kernel void tinyspec_warm_up(__global int* a) { a[0] = 1; }"


def _warm_up(cl, ctx, q, dev):
  """PoCL does a one-time setup (tens of ms) at the first kernel of a process; doing it
  here, when the device opens, keeps it out of every program's load time."""
  try:
    prg, save = _program(cl, ctx, dev, _WARM, [])
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4)
    prg.tinyspec_warm_up(q, (1,), None, buf)
    q.finish()
    if save is not None: _write(save, prg)
  except Exception:   # a device that cannot run it will say so at the first real kernel
    pass


def _program(cl, ctx, dev, source: str, opts: list):
  """(built program, path to store its binary at or None): from the binary cache when it
  holds this source for this device, else built from source."""
  key = digest(source, " ".join(opts), dev.platform.name, dev.name, dev.driver_version)
  path = cache_dir("opencl") / f"{key}.bin"
  data = fetch(path)   # only an entry this cache signed (PoCL's binaries hold native code it loads)
  if data is not None:
    try: return cl.Program(ctx, [dev], [data]).build(options=opts), None
    except (cl.Error, cl.RuntimeError): pass     # stale entry (another driver): rebuild it
  return cl.Program(ctx, source).build(options=opts), path


def _write(path, prg):
  store(path, bytes(prg.binaries[0]))


def has_fp64() -> bool:
  return "cl_khr_fp64" in device()[2].extensions


class Built:
  """A built OpenCL program (one or many kernels). A fresh build's binary is stored in the
  cache after its first launch: PoCL's binary then holds the compiled work-group code too,
  and the next process loads it without compiling anything."""
  def __init__(self, source: str):
    import pyopencl as cl
    ctx, self.queue, dev = device()
    opts = list(render_tables()["targets"]["opencl"].get("options", []))
    try:
      self.prg, self._save = _program(cl, ctx, dev, source, opts)
    except cl.RuntimeError as e:
      from tinyspec.compiler.runtime import BuildError
      raise BuildError(f"OpenCL build failed:\n{str(e)[-4000:]}") from None

  def launched(self):
    if self._save is None: return
    path, self._save = self._save, None
    self.queue.finish()
    _write(path, self.prg)


class CLProgram:
  """A kernel built for the selected device. Built programs are cached as device binaries
  under $TINYSPEC_CACHE/opencl, keyed by source, options and device (PoCL loads one in a
  few ms; from source it would redo its front end even with its own cache warm)."""

  def __init__(self, ks, source: str | None = None, shared: "Built | None" = None):
    self.ks = ks
    self.built = shared or Built(source or ks.source)
    self.queue = self.built.queue
    self.kernel = getattr(self.built.prg, ks.name)

  def __call__(self, args: list, vals: list[int]):
    from tinyspec.intervals import np_dtype
    from tinyspec.compiler.render import launch_size
    gs = [launch_size(g, vals) for g in self.ks.global_size]
    ls = [launch_size(g, vals) for g in self.ks.local_size] if self.ks.local_size else None
    if any(g == 0 for g in gs): return
    if ls: _check_work_group(ls, self.built.queue.device, self.ks.name)
    conv = []
    for p, a, v in zip(self.ks.params, args, vals):
      if p[0] == "scalar": conv.append(np_dtype(p[1]).type(v))
      else: conv.append(a)
    import pyopencl as cl
    try: self.kernel(self.queue, tuple(gs) or (1,), tuple(ls) if ls else None, *conv)
    except cl.Error as e:
      from tinyspec.compiler.props import CompileError
      raise CompileError("run.device", f"the OpenCL device refused to launch kernel {self.ks.name}: {e}") from None
    self.built.launched()


def _check_work_group(ls: list, dev, name: str) -> None:
  """A work-group the device cannot launch is refused before the launch (rule run.device)."""
  from tinyspec.compiler.props import CompileError
  total = 1
  for d in ls: total *= d
  if total > dev.max_work_group_size:
    raise CompileError("run.device", f"kernel {name}: a work-group of {total:,} items ({' x '.join(map(str, ls))}), over the OpenCL "
                                     f"device's limit of {dev.max_work_group_size}")
  for k, (d, most) in enumerate(zip(ls, dev.max_work_item_sizes)):
    if d > most: raise CompileError("run.device", f"kernel {name}: {d:,} work-items in dimension {k}, over the OpenCL device's limit of {most}")
