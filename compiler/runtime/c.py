"""The C runtime: `cc -O2 -shared -fPIC` (options in spec/render.yaml, never -ffast-math)
builds one shared library per kernel source, cached by source hash; ctypes loads it.

ABI of every kernel: void name(void** bufs, const int64_t* vals, int64_t tlo, int64_t thi)
bufs[k] is PARAM slot k's storage, vals[k] the value of a by-value (symbolic) PARAM k,
[tlo, thi) the slice of the THREAD axis this call runs (ignored without one).
"""
from __future__ import annotations
import ctypes
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from compiler.runtime.cache import cache_dir, digest
from compiler.tables import render_tables


class BuildError(RuntimeError):
  pass


@lru_cache(maxsize=None)
def _compiler() -> list[str]:
  cmd = list(render_tables()["targets"]["c"]["compiler"])
  cc = os.environ.get("CC") or cmd[0]
  path = shutil.which(cc)
  if path is None: raise BuildError(f"no C compiler: {cc!r} is not on PATH (set CC)")
  return [path] + cmd[1:]


def _flags() -> list[str]:
  """The compiler command; $TINYSPEC_CFLAGS adds flags after the table's (tests use it to
  build with UBSan and without -fwrapv)."""
  return _compiler() + os.environ.get("TINYSPEC_CFLAGS", "").split()


_LIBS: dict[str, ctypes.CDLL] = {}


def build(source: str) -> str:
  """Path of the shared library for source (compiled unless cached)."""
  cmd = _flags()
  link = list(render_tables()["targets"]["c"].get("link", []))
  key = digest(source, " ".join(cmd + link))
  d = cache_dir("c")
  so = d / f"{key}.so"
  if so.exists(): return str(so)
  with tempfile.TemporaryDirectory(dir=d) as tmp:
    src = os.path.join(tmp, "k.c")
    out = os.path.join(tmp, "k.so")
    with open(src, "w") as f: f.write(source)
    r = subprocess.run(cmd + ["-o", out, src] + link, capture_output=True, text=True)
    if r.returncode != 0: raise BuildError(f"cc failed:\n{r.stderr[-4000:]}")
    os.replace(out, so)
  return str(so)


def load(source: str) -> ctypes.CDLL:
  """The shared library of a translation unit (built unless cached, loaded once)."""
  path = build(source)
  lib = _LIBS.get(path)
  if lib is None: lib = _LIBS[path] = ctypes.CDLL(path)
  return lib


class CProgram:
  """One kernel of a library; `source` is the whole translation unit (by default the
  kernel's own, or several kernels assembled by render.assemble)."""
  def __init__(self, ks, source: str | None = None):
    self.ks = ks
    self.fn = getattr(load(source or ks.source), ks.name)
    self.fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    self.fn.restype = None

  def __call__(self, ptrs: list[int], vals: list[int], threads: int | None = None):
    n = len(ptrs)
    bufs = (ctypes.c_void_p * max(n, 1))(*ptrs)
    vv = (ctypes.c_int64 * max(n, 1))(*vals)
    t = self.ks.thread
    if t is None:
      self.fn(bufs, vv, 0, 0); return
    from compiler.render import launch_size
    total = launch_size(t, vals)
    workers = max(1, min(threads or os.cpu_count() or 1, total))
    if workers == 1:
      self.fn(bufs, vv, 0, total); return
    step = -(-total // workers)
    with ThreadPoolExecutor(workers) as ex:
      list(ex.map(lambda lo: self.fn(bufs, vv, lo, min(lo + step, total)), range(0, total, step)))
