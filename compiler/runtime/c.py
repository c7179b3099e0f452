"""The C runtime: `cc -O2 -shared -fPIC` (options in spec/render.yaml, never -ffast-math)
builds one shared library per kernel source, cached by source hash; ctypes loads it.

ABI of every kernel:
  void name(void** bufs, const int64_t* vals, int64_t tlo, int64_t thi, int64_t phase)
bufs[k] is PARAM slot k's storage (then the kernel's LOCAL buffers: scratch this runtime
allocates), vals[k] the value of a by-value (symbolic) PARAM k. A kernel with a threaded
axis (KernelSource.thread) is called with phase 0 once per slice [tlo, thi) of that axis,
the slices on a persistent thread pool (ctypes releases the GIL; each worker takes the
next chunk of the axis when it is free), then -- when code
follows the loop (KernelSource.tail) -- once with phase 1. Other kernels: one call.
$TINYSPEC_SLICE_ORDER=reversed runs the slices one iteration each, last first, on one
thread: a threaded axis is only ever one whose iterations are independent
(compiler/analysis/parallel.py), so the result must not change; the sanitizer fuzzer
(conformance/fuzz/sanitize.py) runs every threaded program that way.
A kernel with a contraction guard (KernelSource.guard) has a fused variant in the same
library; each launch first scans the buffers the guard names (largest_finite)
and runs the fused variant only where the guard holds for what they hold.
"""
from __future__ import annotations
import ctypes
import itertools
import os
import shutil
import signal
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache
from tinyspec import environment
from tinyspec.compiler.runtime import BuildError, magnitude
from tinyspec.compiler.runtime.cache import cache_dir, digest, fetch, store
from tinyspec.compiler.rendertables import render_tables
from tinyspec.backends import Unavailable
from tinyspec.compiler.device import device
from tinyspec import deadline
import atexit
from tinyspec.compiler.device import host_threads
import numpy as np
from tinyspec.compiler.render import launch_size


@lru_cache(maxsize=None)
def _compiler() -> list[str]:
  T = render_tables()["targets"]["c"]
  cmd = list(T["compiler"])
  cc = os.environ.get("CC") or cmd[0]
  path = shutil.which(cc)
  if path is None: raise BuildError(f"no C compiler: {cc!r} is not on PATH (set CC)")
  return [path] + cmd[1:] + (list(T.get("gcc_flags", [])) if _is_gcc(path) else [])


@lru_cache(maxsize=None)
def compiler_info() -> dict:
  """{"path", "version"} of the C compiler (CC, else the table's); Unavailable without one."""
  try: path = _compiler()[0]
  except BuildError as e: raise Unavailable(f"{e}; install one (Debian/Ubuntu: apt-get install gcc) [backend.unavailable]") from None
  try: out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
  except (OSError, subprocess.SubprocessError) as e: raise Unavailable(f"the C compiler {path} does not run ({e}) [backend.unavailable]") from None
  return {"path": path, "version": (out.splitlines() or ["?"])[0].strip()}


def _is_gcc(path: str) -> bool:
  try: out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
  except (OSError, subprocess.SubprocessError): return False
  return "Free Software Foundation" in out and "clang" not in out.lower()


def _flags() -> list[str]:
  """The compiler command; $TINYSPEC_CFLAGS adds flags after the table's (tests use it to
  build with UBSan and without -fwrapv)."""
  return _compiler() + os.environ.get("TINYSPEC_CFLAGS", "").split()


_LIBS: dict[str, ctypes.CDLL] = {}


def _build_key(source: str) -> tuple[str, list, list]:
  """(the cache key of source's library, the compiler command, the link flags)."""
  cmd = _flags()
  link = list(render_tables()["targets"]["c"].get("link", []))
  return digest(source, " ".join(cmd + link), device("c").name), cmd, link   # -march=native: per CPU model


def build(source: str, timeout: float | None = None) -> bytes:
  """The shared library for source, as bytes: from the cache when an entry there matches
  its signature (compiler/runtime/cache.py), else compiled and stored. With `timeout`
  (seconds; default the time left of the command's --timeout) a compiler run that takes
  longer is killed -- its whole process group: cc's cc1 would outlive cc -- and
  BuildError raised (BEAM drops such candidates)."""
  key, cmd, link = _build_key(source)
  d = cache_dir("c")
  so = d / f"{key}.so"
  data = fetch(so)
  if data is not None: return data
  if timeout is None: timeout = deadline.remaining()
  with tempfile.TemporaryDirectory(dir=d) as tmp:
    src = os.path.join(tmp, "k.c")
    out = os.path.join(tmp, "k.so")
    with open(src, "w") as f: f.write(source)
    p = subprocess.Popen(cmd + ["-o", out, src] + link, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline.track_child(p.pid)
    try:
      _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
      try: os.killpg(p.pid, signal.SIGKILL)
      except OSError: pass
      p.communicate()
      raise BuildError(f"cc took longer than {timeout:g} s; killed") from None
    finally:
      deadline.untrack_child(p.pid)
    if p.returncode != 0: raise BuildError(f"cc failed:\n{err[-4000:]}")
    with open(out, "rb") as f: data = f.read()
  store(so, data)
  return data


def load(source: str) -> ctypes.CDLL:
  """The shared library of a translation unit (built unless cached, loaded once). The
  bytes checked against the cache's signature are the bytes dlopen loads: they are
  written to a file of this process's private folder first, never reopened from the cache."""
  key = _build_key(source)[0]
  lib = _LIBS.get(key)
  if lib is None:
    _sanitizer_runtime_loaded()
    try: lib = _LIBS[key] = _dlopen(build(source), key)
    except OSError as e: raise BuildError(f"the kernels' library does not load: {e} (TINYSPEC_CFLAGS={os.environ.get('TINYSPEC_CFLAGS', '')!r})") from None
  return lib


_RUNTIMES = {"address": ("__asan_init", "asan"), "thread": ("__tsan_init", "tsan")}


def _sanitizer_runtime_loaded() -> None:
  """A library built with -fsanitize=address or thread needs that sanitizer's runtime
  loaded first (LD_PRELOAD): without it, loading ends the process (ASan) or fails. Say
  so before loading it."""
  asked = {k for f in _flags() if f.startswith("-fsanitize=") for k in f[len("-fsanitize="):].split(",")}
  for kind in sorted(asked & set(_RUNTIMES)):
    symbol, lib = _RUNTIMES[kind]
    if not hasattr(ctypes.CDLL(None), symbol):
      raise BuildError(f"TINYSPEC_CFLAGS builds the kernels with -fsanitize={kind}, whose runtime this process has not loaded: "
                       f"start it with LD_PRELOAD=$(cc -print-file-name=lib{lib}.so)")


_LOADED: dict = {"dir": None}


def _dlopen(data: bytes, key: str) -> ctypes.CDLL:
  """dlopen a library's bytes from a fresh file in a private (0700) folder of this process
  (a unique name each time: dlopen reuses a library it already has by name)."""
  if _LOADED["dir"] is None:
    _LOADED["dir"] = tempfile.mkdtemp(prefix="tinyspec-libs-")
    atexit.register(shutil.rmtree, _LOADED["dir"], True)
  fd, path = tempfile.mkstemp(dir=_LOADED["dir"], prefix=key[:16] + ".", suffix=".so")
  try:
    with os.fdopen(fd, "wb") as f: f.write(data)
    return ctypes.CDLL(path)
  finally:
    os.unlink(path)   # the mapping stays; the name goes


_POOL: ThreadPoolExecutor | None = None
CHUNKS_PER_WORKER = 4


def _pool(workers: int) -> ThreadPoolExecutor:
  """The process's worker threads (grown when more are asked for)."""
  global _POOL
  if _POOL is None or _POOL._max_workers < workers:
    _POOL = ThreadPoolExecutor(max(workers, 2), thread_name_prefix="tinyspec-c")
  return _POOL


SCAN_SLICE = 1 << 16     # elements of one scan task at least: below it a thread's start costs more than it saves


@lru_cache(maxsize=None)
def _scanner(bits: int):
  u = {16: ctypes.c_uint16, 32: ctypes.c_uint32, 64: ctypes.c_uint64}[bits]
  f = getattr(load(magnitude.C_SOURCE), f"largest_finite{bits}")
  f.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, u, u]
  f.restype = u
  return f


def largest_finite(buffers: list, threads: int = 1) -> list[float]:
  """max |x| over the finite x of each host buffer (address, dtype, elements), 0.0 where
  none (compiler/runtime/magnitude.py). The buffers are cut into about `threads` tasks of
  similar size: this thread scans the first, the pool's threads the others."""
  tasks = []
  step = max(SCAN_SLICE, -(-sum(n for _, _, n in buffers) // max(1, threads)))
  for k, (ptr, dt, n) in enumerate(buffers):
    bits, mask, inf = magnitude.layout(dt)
    tasks += [(k, _scanner(bits), ptr, lo, min(lo + step, n), mask, inf) for lo in range(0, n, step)]
  found = [0] * len(buffers)
  if threads > 1 and len(tasks) > 1:
    futs = [(k, _pool(threads - 1).submit(f, *a)) for k, f, *a in tasks[1:]]
    k, f, *a = tasks[0]
    found[k] = f(*a)
    for k, fut in futs: found[k] = max(found[k], fut.result())
  else:
    for k, f, *a in tasks: found[k] = max(found[k], f(*a))
  return [magnitude.value(b, dt) for b, (_, dt, _) in zip(found, buffers)]


def _kernel(lib, name: str):
  fn = getattr(lib, name)
  fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64]
  fn.restype = None
  return fn


class CProgram:
  """One kernel of a library; `source` is the whole translation unit (by default the
  kernel's own, or several kernels assembled by render.assemble)."""
  def __init__(self, ks, source: str | None = None):
    self.ks = ks
    lib = load(source or ks.source)
    self.fn = _kernel(lib, ks.name)
    self.fused = _kernel(lib, ks.guard.fused) if ks.guard is not None else None

  def chooser(self, ptrs: list[int], threads: int | None):
    """() -> the function to launch now: the kernel, or its fused variant where the guard
    holds for what the scanned buffers hold at this moment (compiler/runtime/magnitude.py)."""
    g, fn = self.ks.guard, self.fn
    if g is None: return lambda: fn
    bufs = [(ptrs[s], self.ks.params[s][1], self.ks.params[s][2]) for s in g.scans]
    workers = threads or host_threads()
    def choose():
      return self.fused if g.holds(dict(zip(g.scans, largest_finite(bufs, workers)))) else fn
    return choose

  def bind(self, ptrs: list[int], vals: list[int], threads: int | None = None):
    """A call with these arguments, ready to launch any number of times: () -> None."""
    scratch = [np.empty(n, np.uint8) for n in self.ks.scratch]
    allp = list(ptrs) + [a.ctypes.data for a in scratch]
    bufs = (ctypes.c_void_p * max(len(allp), 1))(*allp)
    vv = (ctypes.c_int64 * max(len(vals), 1))(*vals)
    choose, t, tail = self.chooser(ptrs, threads), self.ks.thread, self.ks.tail
    if t is None:
      def run(_keep=scratch): choose()(bufs, vv, 0, 0, 0)    # the scratch lives as long as the call
      return run
    total = launch_size(t, vals)
    if environment.choice("TINYSPEC_SLICE_ORDER", ("reversed",)) == "reversed":   # an independence check (module doc)
      def backwards(_keep=scratch):
        fn = choose()
        for i in reversed(range(total)): fn(bufs, vv, i, i + 1, 0)
        if tail: fn(bufs, vv, 0, 0, 1)
      return backwards
    workers = max(1, min(threads or host_threads(), total))
    # up to CHUNKS_PER_WORKER contiguous chunks per worker, taken one at a time by
    # whichever worker is free: a core busy with something else holds back less
    n = min(total, workers * CHUNKS_PER_WORKER) if workers > 1 else 1
    step = -(-total // n) if total else 1
    slices = [(lo, min(lo + step, total)) for lo in range(0, total, step)]

    def work(next_chunk, fn):
      for i in iter(next_chunk, None):
        if i >= len(slices): return
        fn(bufs, vv, slices[i][0], slices[i][1], 0)

    def launch():
      _keep = scratch   # the scratch lives as long as the call
      fn = choose()
      if workers > 1 and len(slices) > 1:
        counter = itertools.count()
        nxt = counter.__next__           # atomic under the GIL
        futs = [_pool(workers - 1).submit(work, nxt, fn) for _ in range(workers - 1)]
        work(nxt, fn)
        for f in futs: f.result()
      else:
        for lo, hi in slices: fn(bufs, vv, lo, hi, 0)
      if tail: fn(bufs, vv, 0, 0, 1)
    return launch

  def __call__(self, ptrs: list[int], vals: list[int], threads: int | None = None):
    self.bind(ptrs, vals, threads)()
