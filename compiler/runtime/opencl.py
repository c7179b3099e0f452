"""The OpenCL runtime through pyopencl (PoCL on a CPU here; any platform works).

POCL_CACHE_DIR is pointed into the tinyspec cache before pyopencl is imported, so PoCL
keeps its compiled kernels there too; pyopencl's own binary cache (keyed by source and
options) lives in the same directory. The device: TINYSPEC_OPENCL_DEVICE is
"P:D" (platform and device indices) or a substring of the device name; default the first
device of the first platform.
"""
from __future__ import annotations
import os
from functools import lru_cache
from compiler.runtime.cache import cache_dir
from compiler.tables import render_tables

os.environ.setdefault("POCL_CACHE_DIR", str(cache_dir("pocl")))


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
  return ctx, cl.CommandQueue(ctx), pick


def has_fp64() -> bool:
  return "cl_khr_fp64" in device()[2].extensions


class CLProgram:
  def __init__(self, ks):
    import pyopencl as cl
    self.ks = ks
    ctx, self.queue, dev = device()
    opts = list(render_tables()["targets"]["opencl"].get("options", []))
    try:
      self.prg = cl.Program(ctx, ks.source).build(options=opts, cache_dir=str(cache_dir("opencl")))
    except cl.RuntimeError as e:
      from compiler.runtime.c import BuildError
      raise BuildError(f"OpenCL build failed:\n{str(e)[-4000:]}") from None
    self.kernel = getattr(self.prg, ks.name)

  def __call__(self, args: list, vals: list[int]):
    from tinyspec.intervals import np_dtype
    gs = [vals[g[1]] if isinstance(g, tuple) else g for g in self.ks.global_size]
    if any(g == 0 for g in gs): return
    conv = []
    for p, a, v in zip(self.ks.params, args, vals):
      if p[0] == "scalar": conv.append(np_dtype(p[1]).type(v))
      else: conv.append(a)
    self.kernel(self.queue, tuple(gs) or (1,), None, *conv)
