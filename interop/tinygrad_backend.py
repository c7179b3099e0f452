"""The `tinygrad` conformance backend: a tinyspec graph built in tinygrad and realized.

    TinygradBackend().run(graph, {"buf0": x}) -> {"out0": ...}   # like refimpl.evaluate

A tensor-level graph is built through tinygrad's Tensor API, node by node
(interop/tinygrad_tensor.py); a kernel-level graph (a SINK over PARAMs) becomes a tinygrad
kernel of UOps run with `Tensor.custom_kernel` (interop/tinygrad_kernel.py). Graphs the
validator rejects are refused with its rule id; a valid graph the adapter does not build
is refused as backend.unsupported.

The device: TINYSPEC_TINYGRAD_DEVICE (CPU, PYTHON for tinygrad's emulator, CL for OpenCL:
PoCL here, through pyopencl's own libOpenCL); unset, CPU when `clang` is on PATH
(tinygrad's CPU device compiles with it, even to open), else PYTHON (a warning says so
once); interop/tinygrad_device.py. The device is the backend's label: its expected
failures are conformance/manifests/tinygrad-<DEVICE>.yaml, each a tinygrad bug of
docs/tinygrad-bugs.md. The backend claims the portable profile (tinygrad's results are
judged against the results the decisions allow).
"""
from __future__ import annotations
import os
import shutil
from importlib.metadata import version, PackageNotFoundError
from tinyspec.backends import Backend, Capabilities, Unavailable, describe_by_capabilities
from tinyspec.interop.tinygrad_names import Unexpressed, _backend_table, tg_dtype, tg_op  # noqa: F401 (tg_dtype, tg_op: the backend's API)
from tinyspec.interop.tinygrad_device import (Refused, _base, _device_context,  # noqa: F401 (the backend's
                                             have_clang, open_cl, tinygrad_device)  # API: Refused, have_clang, open_cl)
from tinyspec.interop.tinygrad_tensor import TensorBuilder
from tinyspec.interop.tinygrad_kernel import KernelBuilder
from tinyspec.tables import tables
from tinyspec.dtypes import DTYPES
from tinyspec.validate import validate


def unsupported(device: str) -> dict:
  """op -> why, for the ops tinygrad's `device` cannot run from a graph (the map table's
  backend.unsupported: `all` and the device's own)."""
  u = _backend_table()["unsupported"]
  return {**u.get("all", {}), **u.get(_base(device), {})}


def _version() -> str:
  try: return version("tinygrad")
  except PackageNotFoundError: return "?"


def _triage_on(device: str):
  """The backend's triage on `device` (what a campaign unit sorts its findings by)."""
  return TinygradBackend(device).triage


class TinygradBackend(Backend):
  name = "tinygrad"
  device_variable = "TINYSPEC_TINYGRAD_DEVICE"

  def __init__(self, device: str | None = None):
    self.device = device or tinygrad_device()
    # tinygrad reads DEV when it is first imported (helpers.DEV); its Device.DEFAULT is
    # only a fallback here (every tensor names its device), and _device_context() keeps it
    # on this device when tinygrad was imported with another DEV.
    os.environ.setdefault("DEV", _base(self.device))

  def capabilities(self) -> Capabilities:
    import tinygrad  # noqa: F401, PLC0415 (tinygrad, an optional dependency: without it the backend is unavailable)
    T, B = tables(), _backend_table()
    ops: dict[str, set] = {}
    for lv, spec in B["levels"].items():
      names = {n for n, o in T.ops.items() if o.category in spec.get("categories", ()) and lv in o.levels}
      names |= set(spec.get("ops", ()))
      names -= set(unsupported(self.device))
      for n in names: ops.setdefault(n, set()).add(lv)
    self.setup()
    dts = frozenset(n for n, d in DTYPES.items() if d.cls != "void") - set(B.get("unsupported_dtypes", ()))
    # tinygrad divides as DIV's decomposition MUL(A, RECIP(B)) (mixin/elementwise.py div): the decomposed bounds apply
    return Capabilities({k: frozenset(v) for k, v in ops.items()}, dts, tuple(B["devices"]), decomposed=True,
                        profile="portable", label=_base(self.device))

  def describe(self) -> dict:
    try: import tinygrad  # noqa: F401, PLC0415 (is tinygrad installed? an optional dependency)
    except ImportError as e: return {"status": "unavailable", "why": f"tinygrad is not installed ({e}): pip install 'tinyspec[tinygrad]'", "details": []}
    out = describe_by_capabilities(self)
    out["details"] = [f"tinygrad {_version()}, device {self.device} (TINYSPEC_TINYGRAD_DEVICE; "
                      f"expected failures: conformance/manifests/tinygrad-{_base(self.device)}.yaml)",
                      f"clang for its CPU device: {shutil.which('clang') or 'not installed (apt-get install clang)'}"]
    return out

  def setup(self) -> None:
    """Once: the device must work (CPU needs clang), and the dtypes of the table's
    `emulate` run through tinygrad's own emulation (EMULATED_DTYPES)."""
    if getattr(self, "_ready", False): return
    if _base(self.device) == "CPU" and not have_clang():
      raise Unavailable("tinygrad's CPU device needs clang (apt-get install clang), or set TINYSPEC_TINYGRAD_DEVICE=PYTHON [backend.unavailable]")
    if _base(self.device) == "CL": open_cl()
    from tinygrad.helpers import EMULATED_DTYPES  # noqa: PLC0415 (tinygrad, an optional dependency)
    want = [x for x in EMULATED_DTYPES.value.split(",") if x] + list(_backend_table()["emulate"])
    EMULATED_DTYPES.value = ",".join(dict.fromkeys(want))
    self._ready = True

  def triage(self, failure, out):
    """A fuzz finding sorted: a documented tinygrad bug, a limit of this adapter, or new (with
    a tinygrad-only repro.py written under out and checked to fail): interop/hunt.py."""
    from tinyspec.interop.hunt import triage  # noqa: PLC0415 (start-up time: the hunt, 20-50 ms with its repro writer, loads only to sort a fuzz finding)
    return triage(failure, out, _base(self.device), self.kernel_uops)

  def campaign(self, minutes: float, devices, out, seed: int = 0, log=print, **cluster):
    """Hunt on each device for `minutes` (interop/campaign.py) in units on Dask (cluster:
    examples, scheduler, jobs, db, progress: interop/campaign_units.py); prints each new bug once."""
    from tinyspec.interop.campaign_units import campaign  # noqa: PLC0415 (start-up time: the campaign machinery, 50 ms with the cluster, the findings database and the compositions, loads only for a campaign)
    return campaign(minutes, devices, out, seed, log, _triage_on, **cluster)

  def kernel_uops(self, graph, res, inputs: dict):
    """(the kernel's SINK of UOps over placeholders, [(input name, dtype, shape) per PARAM
    slot]): what run() would give Tensor.custom_kernel (a repro writes it with pyrender)."""
    return KernelBuilder(self.device, graph, res, inputs).uops()

  def run(self, graph, inputs: dict) -> dict:
    self.setup()
    res = validate(graph)
    if not res.ok:
      d = res.diagnostics[0]
      raise Refused(d.format(), d.rule)
    if res.level not in ("tensor", "kernel"): raise Refused(f"{res.level}-level graphs are not run by the tinygrad backend", "backend.unsupported")
    with _device_context(self.device):
      try:
        if res.level == "tensor": return TensorBuilder(self.device, graph, res, inputs).outputs()
        return KernelBuilder(self.device, graph, res, inputs).outputs()
      except Unexpressed as e:   # the adapter's own limit, not tinygrad's failure
        raise Refused(str(e), "backend.unsupported") from None
