"""The OpenCL runtime through pyopencl (PoCL on a CPU, NVIDIA's or AMD's on a GPU, the
Oclgrind simulator; any platform works).

POCL_CACHE_DIR is pointed into the tinyspec cache before pyopencl is imported, so PoCL
keeps its compiled kernels there too; pyopencl's own binary cache (keyed by source and
options) lives in the same directory.

The device: TINYSPEC_OPENCL_DEVICE is "P:D" (platform and device indices) or a substring
of the device's or platform's name; unset, the first device that builds and runs a
trivial kernel (the pip PoCL's LLVM 14 cannot build on CPUs it does not know, e.g. AMD
Zen 5, while the distribution's PoCL can: both may be installed). A device that was named
and cannot build is refused, as is a machine where none can: once, with rule
backend.unavailable and what to do (OpenCLUnavailable; every entry point exits 2).
"table:NAME" names a device described by a table (compiler/device.py table_device):
programs compile for it and run on the default device.

"Oclgrind" (any case) selects the Oclgrind simulator (Debian package oclgrind) with no
set-up by the user: its ICD is registered for this process only, through OCL_ICD_VENDORS
pointing at a folder of the cache holding it beside the system's ICD files (never by
changing system files). Its data-race check is on (OCLGRIND_DATA_RACES; its bounds and
barrier checks always are; OCLGRIND_UNINITIALIZED=1 adds its uninitialized-value check,
which also flags bytes a buffer copy wrote), its diagnostics go to a log this runtime reads
after each program, and a diagnostic fails the run (rule run.oclgrind): the kernels'
adversary on machines without a GPU.
"""
from __future__ import annotations
import os
import shutil
from functools import lru_cache
from pathlib import Path
from tinyspec.files import FileRefused, read_text, write_file
from tinyspec.backends import Unavailable
from tinyspec.compiler.runtime import magnitude
from tinyspec.compiler.runtime.cache import cache_dir, digest, fetch, store
from tinyspec.compiler.rendertables import render_tables
import numpy as np
from tinyspec.compiler.errors import CompileError
from tinyspec.compiler.runtime import BuildError
from tinyspec.intervals import np_dtype
from tinyspec.compiler.render import launch_size

os.environ.setdefault("POCL_CACHE_DIR", str(cache_dir("pocl")))   # (the private temporary cache when the configured one is unsafe)

RULE = "backend.unavailable"
OCLGRIND_ICD = ("/usr/lib/oclgrind/liboclgrind-rt-icd.so", "/usr/lib/x86_64-linux-gnu/oclgrind/liboclgrind-rt-icd.so",
                "/usr/local/lib/oclgrind/liboclgrind-rt-icd.so")
ADVICE = ("Install your distribution's PoCL (Debian/Ubuntu: apt-get install pocl-opencl-icd; scripts/setup.sh does it "
          "when run as root), or pick a device that builds with TINYSPEC_OPENCL_DEVICE=NAME or P:D (`tinyspec backends` "
          "lists the devices here and whether each builds). The PoCL that pip installs (LLVM 14) cannot build kernels on CPUs "
          "its LLVM does not know (e.g. AMD Zen 5).")



class OpenCLUnavailable(Unavailable):
  """No usable OpenCL device (rule backend.unavailable)."""


def wanted() -> str:
  """TINYSPEC_OPENCL_DEVICE without a table's name (a table's programs run on the default device)."""
  want = os.environ.get("TINYSPEC_OPENCL_DEVICE", "").strip()
  return "" if want.startswith("table:") else want


def is_oclgrind(want: str) -> bool:
  return "oclgrind" in want.lower()


def oclgrind_library() -> str | None:
  """Oclgrind's ICD library, where its package put it (None: not installed)."""
  exe = shutil.which("oclgrind")
  near = [str(Path(exe).resolve().parent.parent / "lib" / "oclgrind" / "liboclgrind-rt-icd.so")] if exe else []
  return next((p for p in (*OCLGRIND_ICD, *near) if os.path.isfile(p)), None)


def _register_oclgrind() -> None:
  """OCL_ICD_VENDORS -> a cache folder with Oclgrind's ICD beside the system's, for this
  process (and the processes it starts); a user's own OCL_ICD_VENDORS is kept."""
  if os.environ.get("OCL_ICD_VENDORS"): return
  lib = oclgrind_library()
  if lib is None:
    raise OpenCLUnavailable(f"TINYSPEC_OPENCL_DEVICE={wanted()}: Oclgrind is not installed (Debian/Ubuntu: apt-get install oclgrind) [{RULE}]")
  d = cache_dir("icd")
  icds = {"tinyspec-oclgrind.icd": lib + "\n"}
  for f in sorted(Path("/etc/OpenCL/vendors").glob("*.icd")):
    try: icds[f.name] = f.read_text()
    except OSError: pass
  for name, text in icds.items():
    if _regular_text(d / name) != text: _write_cached(d / name, text)
  os.environ["OCL_ICD_VENDORS"] = str(d)
  os.environ.setdefault("OCLGRIND_DATA_RACES", "1")
  # (its uninitialized-value check stays off unless asked for: it counts bytes a buffer copy
  # or an earlier kernel wrote as uninitialized, a report against a correct program)
  if not os.environ.get("OCLGRIND_LOG"):
    log = d / f"oclgrind-{os.getpid()}.log"
    _write_cached(log, "")     # a new regular file: Oclgrind appends to it, never through a link planted at its name
    os.environ["OCLGRIND_LOG"] = str(log)


def _regular_text(path: Path) -> str | None:
  """The text of a regular file at path (not through a link), or None."""
  if os.path.islink(path): return None
  try: return read_text(path, 1 << 16)
  except FileRefused: return None


def _write_cached(path: Path, text: str) -> None:
  """A file of the cache written through a temporary name and renamed over whatever is at
  path: a link planted there is replaced, never followed."""
  try: write_file(path, text)
  except FileRefused as e: raise OpenCLUnavailable(f"TINYSPEC_OPENCL_DEVICE={wanted()}: {e.message} ({path}) [{RULE}]") from None


def devices() -> list:
  """Every (platform, device) pyopencl lists here, in platform order."""
  want = wanted()
  if is_oclgrind(want): _register_oclgrind()
  try:
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
  except ImportError as e:
    raise OpenCLUnavailable(f"pyopencl is not installed ({e}); pip install 'pyopencl[pocl]' [{RULE}]") from None
  try:
    plats = cl.get_platforms()
  except cl.Error as e:
    raise OpenCLUnavailable(f"no OpenCL platform ({str(e)[:200]}). {ADVICE} [{RULE}]") from None
  # one ICD file found twice (the system's and pyopencl's own folder) lists one platform twice
  return list(dict.fromkeys((p, d) for p in dict.fromkeys(plats) for d in p.get_devices()))


def _matching(devs: list, want: str) -> list:
  if ":" in want and all(x.isdigit() for x in want.split(":", 1)):
    pi, di = (int(x) for x in want.split(":", 1))
    plats = list(dict.fromkeys(p for p, _ in devs))
    if pi < len(plats):
      ds = [d for p, d in devs if p == plats[pi]]
      if di < len(ds): return [(plats[pi], ds[di])]
    return []
  w = want.lower()
  return [(p, d) for p, d in devs if w in d.name.lower() or w in p.name.lower()]


def label(p, d) -> str:
  """The device and its platform's implementation: "pthread-Intel(R) ... [OpenCL 3.0 PoCL 3.0-rc2]"."""
  return f"{d.name.strip()} [{p.version.strip().split('  ')[0][:40]}]"


_failed: list = []   # the refusal, once made: every later call repeats it at once


def device():
  """(context, queue, device): the device TINYSPEC_OPENCL_DEVICE names, else the first that
  builds and runs a trivial kernel; OpenCLUnavailable (rule backend.unavailable) where none does."""
  if _failed: raise OpenCLUnavailable(_failed[0])
  try: return _open()
  except OpenCLUnavailable as e:
    _failed.append(str(e))
    raise


@lru_cache(maxsize=None)
def _open():
  import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
  devs, want = devices(), wanted()
  if not devs: raise OpenCLUnavailable(f"no OpenCL device. {ADVICE} [{RULE}]")
  cands = _matching(devs, want) if want else devs
  if not cands:
    raise OpenCLUnavailable(f"TINYSPEC_OPENCL_DEVICE={want}: no device matches (a name substring or P:D); here: "
                            + "; ".join(f"{i}: {label(p, d)}" for i, (p, d) in enumerate(devs)) + f" [{RULE}]")
  pick, failures = choose(cands, lambda d: trial(cl, d))
  if pick is not None:
    ctx = cl.Context([pick])
    return ctx, cl.CommandQueue(ctx), pick
  head = (f"TINYSPEC_OPENCL_DEVICE={want}: the device cannot build a kernel" if want else
          "no OpenCL device here can build a kernel")
  raise OpenCLUnavailable(f"{head}:\n  " + "\n  ".join(failures) + f"\n{ADVICE} [{RULE}]")


def survey() -> list[dict]:
  """Every device here, "P:D" indexed, and whether it builds and runs the trial kernel."""
  import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
  devs, rows = devices(), []
  plats = list(dict.fromkeys(p for p, _ in devs))
  for p, d in devs:
    why = trial(cl, d)
    rows.append({"index": f"{plats.index(p)}:{[x for q, x in devs if q == p].index(d)}", "device": label(p, d),
                 "builds": why is None, "why": why})
  return rows


def choose(cands: list, try_one) -> tuple:
  """(the first device of cands for which try_one(device) says nothing is wrong, or None;
  a line per device passed over: what it said)."""
  failures = []
  for p, d in cands:
    why = try_one(d)
    if why is None: return d, failures
    failures.append(f"{label(p, d)}: {why}")
  return None, list(dict.fromkeys(failures))   # one ICD registered twice lists its device twice


_TRIAL = "__kernel void tinyspec_trial(__global int* a) { a[get_global_id(0)] = 7 * (int)get_global_id(0) + 1; }"


def trial(cl, dev) -> str | None:
  """Why the device cannot build and run a trivial kernel (None: it can). The binary is
  cached, so a device that worked before answers in milliseconds; this also does PoCL's
  one-time set-up (tens of ms) when the device opens, not at a program's first kernel."""
  try:
    ctx = cl.Context([dev])
    q = cl.CommandQueue(ctx)
    prg, save = _program(cl, ctx, dev, _TRIAL, [])
    out = np.zeros(4, np.int32)
    buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, out.nbytes)
    prg.tinyspec_trial(q, (4,), None, buf)
    cl.enqueue_copy(q, out, buf)
    q.finish()
    if out.tolist() != [1, 8, 15, 22]: return f"the trial kernel ran but wrote {out.tolist()}"
    if save is not None: _write(save, prg)
    return None
  except Exception as e:   # (cl.Error, cl.RuntimeError, a driver's own): the device is not usable
    return _first_error(str(e))


def _first_error(log: str) -> str:
  """The line of a build log that says what went wrong (PoCL: `error: unknown target CPU
  'generic'`), not pyopencl's own framing of it."""
  frame = ("clbuildprogram failed", "build on <pyopencl", "(options:", "(source saved")
  lines = [x.strip() for x in log.splitlines() if x.strip() and not x.strip().lower().startswith(frame)]
  hit = next((x for x in lines if "error" in x.lower()), None)
  return (hit or (lines[0] if lines else log.strip().splitlines()[0] if log.strip() else "failed"))[:240]


def build_options(dev) -> list:
  """spec/render.yaml targets.opencl `options`, and `device_options` of the device's kind."""
  T = render_tables()["targets"]["opencl"]
  extra = [o for key, opts in (T.get("device_options") or {}).items() if key.lower() in dev.name.lower() for o in opts]
  return list(T.get("options", [])) + extra


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


_log_seen: dict = {}


def _on_oclgrind() -> bool:
  d = device()[2]
  return is_oclgrind(d.platform.name + d.name)


def simulator_errors() -> str | None:
  """Oclgrind's diagnostics since the last call (None: none, or not on Oclgrind)."""
  log = os.environ.get("OCLGRIND_LOG")
  if not log or not _on_oclgrind(): return None
  try:
    with open(log, "rb") as f:
      f.seek(_log_seen.get(log, 0))
      new = f.read(1 << 16)                      # (the first 64 KiB say what went wrong)
      _log_seen[log] = f.seek(0, os.SEEK_END)    # the rest belongs to this run too, not to the next one
  except OSError:
    return None
  text = new.decode(errors="replace").strip()
  return text or None


def check_simulator() -> None:
  """After a program ran: an Oclgrind diagnostic (a race, an access out of bounds, an
  uninitialized read, a divergent barrier) fails it, rule run.oclgrind."""
  text = simulator_errors()
  if text:
    raise CompileError("run.oclgrind", "Oclgrind reported: " + " | ".join(x for x in text.splitlines() if x.strip())[:1500])


class Built:
  """A built OpenCL program (one or many kernels). A fresh build's binary is stored in the
  cache after its first launch: PoCL's binary then holds the compiled work-group code too,
  and the next process loads it without compiling anything."""
  def __init__(self, source: str):
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
    ctx, self.queue, dev = device()
    opts = build_options(dev)
    try:
      self.prg, self._save = _program(cl, ctx, dev, source, opts)
    except cl.RuntimeError as e:
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
    try:
      self.kernel = getattr(self.built.prg, ks.name)
      self.fused = getattr(self.built.prg, ks.guard.fused) if ks.guard is not None else None
    except Exception as e:   # built, yet the implementation cannot make the kernel
      raise BuildError(f"OpenCL: kernel {ks.name} built but could not be created: {str(e)[:300]}"
                       + (f" (Oclgrind: {simulator_errors()})" if _on_oclgrind() else "")) from None

  def __call__(self, args: list, vals: list[int]):
    gs = [launch_size(g, vals) for g in self.ks.global_size]
    ls = [launch_size(g, vals) for g in self.ks.local_size] if self.ks.local_size else None
    if any(g == 0 for g in gs): return
    if ls: _check_work_group(ls, self.built.queue.device, self.ks.name)
    conv = []
    for p, a, v in zip(self.ks.params, args, vals):
      if p[0] == "scalar": conv.append(np_dtype(p[1]).type(v))
      else: conv.append(a)
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
    kernel = self.kernel
    if self.fused is not None:   # the fused variant where what the guard's buffers hold now proves it
      g = self.ks.guard
      largest = largest_finite_cl([(conv[s], self.ks.params[s][1], self.ks.params[s][2]) for s in g.scans])
      if g.holds(dict(zip(g.scans, largest))): kernel = self.fused
    try: kernel(self.queue, tuple(gs) or (1,), tuple(ls) if ls else None, *conv)
    except cl.Error as e:
      raise CompileError("run.device", f"the OpenCL device refused to launch kernel {self.ks.name}: {e}") from None
    self.built.launched()


def _check_work_group(ls: list, dev, name: str) -> None:
  """A work-group the device cannot launch is refused before the launch (rule run.device)."""
  total = 1
  for d in ls: total *= d
  if total > dev.max_work_group_size:
    raise CompileError("run.device", f"kernel {name}: a work-group of {total:,} items ({' x '.join(map(str, ls))}), over the OpenCL "
                                     f"device's limit of {dev.max_work_group_size}")
  for k, (d, most) in enumerate(zip(ls, dev.max_work_item_sizes)):
    if d > most: raise CompileError("run.device", f"kernel {name}: {d:,} work-items in dimension {k}, over the OpenCL device's limit of {most}")


SCAN_GROUPS_PER_UNIT = 4
_SCANNERS: dict = {}


def _scanner():
  """(queue, scan kernel per width, items per group, groups, result buffer) of the selected
  device: work-groups of 256 items (or the device's largest power of two below), 4 per
  compute unit."""
  import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
  ctx, queue, dev = device()
  got = _SCANNERS.get(id(ctx))
  if got is None:
    items = 256
    while items > max(1, int(dev.max_work_group_size)): items //= 2
    groups = max(1, int(dev.max_compute_units)) * SCAN_GROUPS_PER_UNIT
    built = Built(f"#define CL_ITEMS {items}\n" + magnitude.CL_SOURCE)
    kernels = {w: cl.Kernel(built.prg, f"largest_finite{w}") for w in (16, 32, 64)}
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, groups * 8)
    got = _SCANNERS[id(ctx)] = (ctx, built.queue, kernels, items, groups, out)
  return got[1:]


def largest_finite_cl(buffers: list) -> list[float]:
  """max |x| over the finite x of each OpenCL buffer (cl.Buffer, dtype, elements), 0.0
  where none, scanned on the device (compiler/runtime/magnitude.py) in the queue after what
  was enqueued before; one value per work-group is read back."""
  import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
  queue, kernels, items, groups, out = _scanner()
  res = []
  for buf, dt, n in buffers:
    bits, mask, inf = magnitude.layout(dt)
    U = {16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]
    kernels[bits](queue, (groups * items,), (items,), buf, np.uint64(n), U(mask), U(inf), out)
    parts = np.empty(groups, U)
    cl.enqueue_copy(queue, parts, out)      # (blocking: the guard decides the next launch)
    res.append(magnitude.value(int(parts.max()) if n else 0, dt))
  return res
