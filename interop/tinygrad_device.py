"""Which tinygrad device the `tinygrad` backend runs on, opening it (CPU needs clang, CL here
is PoCL through pyopencl's libOpenCL, PYTHON is tinygrad's emulator), the spec's devices
mapped onto its instances, and arrays moved onto it and back.

Every tensor the backend makes names its device, and a value of constants only (which
tinygrad keeps deviceless and would realize on a hard-coded "CPU") is realized on the
backend's device, so a PYTHON run never opens tinygrad's CPU device or runs clang.
Results come back in the spec's dtypes.
"""
from __future__ import annotations
import contextlib
import glob
import os
import shutil
import sys
import numpy as np
from tinyspec.interop.tinygrad_names import tg_dtype
from tinyspec.intervals import np_dtype


class Refused(Exception):
  """The backend does not run this graph; `rule` names the broken rule, if any."""
  def __init__(self, message: str, rule: str | None = None):
    super().__init__(message + (f" [{rule}]" if rule else ""))
    self.rule = rule


def have_clang() -> bool:
  """Whether tinygrad's CPU device can open: CPUDevice.__init__ compiles its runtime helpers
  with ClangCompiler, which runs `clang` (tinygrad/runtime/ops_cpu.py, compiler_cpu.py)."""
  return shutil.which("clang") is not None


_warned: set = set()


def tinygrad_device() -> str:
  """TINYSPEC_TINYGRAD_DEVICE; unset, CPU where clang is on PATH, else PYTHON."""
  dev = os.environ.get("TINYSPEC_TINYGRAD_DEVICE")
  if dev: return dev
  if have_clang(): return "CPU"
  if "PYTHON" not in _warned:
    _warned.add("PYTHON")
    print("tinyspec: no clang on PATH, the tinygrad backend uses tinygrad's PYTHON device (slow; "
          "its expected failures are conformance/manifests/tinygrad-PYTHON.yaml; the CPU device needs clang)", file=sys.stderr)
  return "PYTHON"


def _base(device: str) -> str:
  return device.split(":")[0].upper()


def open_cl() -> None:
  """tinygrad's CL device on PoCL: its ctypes loader needs OPENCL_PATH (pyopencl's wheel
  ships libOpenCL in pyopencl/.libs), and the ICD only initializes once pyopencl has
  loaded it (opening CL first segfaults in clGetPlatformIDs)."""
  try: import pyopencl  # noqa: PLC0415 (pyopencl, an optional dependency: the opencl extra)
  except ImportError as e: raise Refused(f"tinygrad's CL device here needs pyopencl with PoCL ({e})") from None
  if not os.environ.get("OPENCL_PATH"):
    libs = sorted(glob.glob(os.path.join(os.path.dirname(pyopencl.__file__), ".libs", "libOpenCL*")))
    if libs: os.environ["OPENCL_PATH"] = libs[0]


def _device_context(device: str):
  """tinygrad's default device (Device.DEFAULT, from DEV) set to the backend's device while
  a graph runs, where it is another one: the backend names the device of every tensor it
  makes, this covers any default tinygrad falls back to inside. Unchanged (a no-op) where
  DEV already names the device, so DEV's renderer choice (DEV=CPU:LLVM) is kept."""
  from tinygrad.helpers import DEV, Context  # noqa: PLC0415 (tinygrad, an optional dependency)
  if (DEV.device or "").upper() == _base(device): return contextlib.nullcontext()
  return Context(DEV=_base(device))


def _device_map(backend_device: str):
  """spec device name -> tinygrad device: CPU is the backend's device, any other name its
  own instance of it (DEV:1, DEV:2 ... in order of appearance), or the device itself where
  there is no other instance (an OpenCL platform with one device: a copy to itself)."""
  names: dict[str, str] = {}
  def dev(name):
    if name is None: return None
    if isinstance(name, (list, tuple)): raise Refused(f"n-tuple device {tuple(name)} (sharding) is not run by the tinygrad backend", "backend.unsupported")
    if name not in names:
      names[name] = backend_device if name == "CPU" else _instance(backend_device, 1 + sum(k != "CPU" for k in names))
    return names[name]
  return dev


def _instance(device: str, k: int) -> str:
  from tinygrad import Device  # noqa: PLC0415 (tinygrad, an optional dependency)
  try:
    Device[f"{device}:{k}"]
    return f"{device}:{k}"
  except Exception:   # noqa: BLE001 (no such instance: tinygrad raises what its runtime raises)
    return device


# ------------------------------------------------------------------ arrays onto the device and back
def to_tensor(a: np.ndarray, dtype: str, shape, device):
  """A tinygrad Tensor on `device` holding array a as spec dtype `dtype`, shaped `shape`."""
  from tinygrad import Tensor, dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  a = np.ascontiguousarray(np.asarray(a).reshape(shape))
  if dtype == "bfloat16": return Tensor(a.view(np.uint16), device=device).bitcast(dtypes.bfloat16)
  return Tensor(a, device=device, dtype=tg_dtype(dtype))


def on_device(t, device: str):
  """t, with a value of constants only put on `device`. tinygrad keeps such a value on no
  device (Tensor(3, device=D) is a CONST without D, tensor.py Tensor.__init__), `.to(D)`
  leaves it there (tensor.py Tensor.to: `if self.uop.device is None: return self`), and
  `.numpy()` would realize it on a hard-coded CPU (tensor.py Tensor._buffer:
  `x.clone("CPU")`), which compiles with clang whatever DEV says. The same clone as
  _buffer's, to the backend's device."""
  if t.device is not None: return t
  return t.contiguous().clone(device)


def from_tensor(t, dtype: str, device: str) -> np.ndarray:
  """Tensor t realized on `device`, as a NumPy array of spec dtype `dtype`."""
  from tinygrad import dtypes  # noqa: PLC0415 (tinygrad, an optional dependency)
  if dtype == "bfloat16": return on_device(t.bitcast(dtypes.uint16), device).numpy().view(np_dtype("bfloat16"))
  return np.asarray(on_device(t, device).numpy()).astype(np_dtype(dtype), copy=False)
