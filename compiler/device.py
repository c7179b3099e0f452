"""The device a target runs on, as the optimizer sees it (spec/render.yaml `devices`).

  device(target) -> Device(target, name, kind, threads, local_mem, max_local, tensor_cores)

`c` runs on this host: its CPU model, `threads` = the cores (TINYSPEC_THREADS overrides).
`opencl` is the device the OpenCL runtime opens (TINYSPEC_OPENCL_DEVICE); when none can be
opened the table's defaults describe it, so compiling (printing source) still works.
table_device(name) is a device described by spec/render.yaml `device_tables` (an H100,
say): compile for it with compile_graph(..., device=table_device("h100")) or
TINYSPEC_OPENCL_DEVICE=table:h100, and check the launch shapes (compiler/analysis/gpucheck.py)
on a machine without it.
The heuristics choose their OptOps from `kind`; BEAM caches its winners per `key()`.
"""
from __future__ import annotations
import os
import platform
from pathlib import Path
from dataclasses import dataclass
from functools import lru_cache
from tinyspec import environment
from tinyspec.compiler.rendertables import render_tables
from tinyspec.compiler.runtime.opencl import device as cl_device


@dataclass(frozen=True)
class Device:
  target: str
  name: str
  kind: str            # "cpu" or "gpu": which heuristics apply
  threads: int         # C: worker threads for THREAD / GROUP_REDUCE axes
  local_mem: int       # bytes of workgroup (LOCAL) memory; C: the scratch is unbounded (0 = no limit)
  max_local: int       # the most work items in one workgroup (C: no limit, 0)
  tensor_cores: bool   # matrix units the renderer can use (TC)
  vector_bytes: int = 16   # the widest vector register: UPCAST lanes that fill one are one vector
  warp: int = 1            # work items that issue together (NVIDIA warp, AMD wavefront; 1: unknown / CPU)
  peak_gflops: float = 0.0 # datasheet fp32 GFLOPS (0: unknown)
  peak_gbs: float = 0.0    # datasheet memory GB/s (0: unknown)
  cache_bytes: int = 0     # C: the host's last-level cache (0: unknown); outputs this big stream (render.yaml `streaming`)

  def key(self) -> str:
    return f"{self.target}:{self.name}:{self.kind}:{self.threads}"


def vector_bytes(target: str, kind: str, device_bytes: int) -> int:
  """The widest vector the heuristics may emit: what the device says it prefers, capped by
  the table's limit for its kind (spec/render.yaml `devices`: what such devices build)."""
  cap = render_tables()["devices"][target].get("vector_bytes", {}).get(kind, 16)
  return max(4, min(int(cap), int(device_bytes)))


def _cpu_vector_bytes() -> int:
  """The host's vector width (the C target compiles with -march=native)."""
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("flags"):
          flags = set(line.split(":", 1)[1].split())
          return 64 if "avx512f" in flags else 32 if "avx" in flags else 16
  except OSError:
    pass
  return 16


def _cpu_cache_bytes() -> int:
  """The largest cache the host's first CPU reports (Linux sysfs; 0 where it says nothing)."""
  best = 0
  for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
    try: text = (d / "size").read_text().strip()
    except OSError: continue
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    n = text[:-1] if text[-1:] in units else text
    if n.isdigit(): best = max(best, int(n) * units.get(text[-1:], 1))
  return best


def _cpu_name() -> str:
  try:
    with open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"): return line.split(":", 1)[1].strip()
  except OSError:
    pass
  return platform.processor() or platform.machine() or "cpu"


def host_threads() -> int:
  """TINYSPEC_THREADS, else the cores this process may use."""
  return environment.integer("TINYSPEC_THREADS", usable_cpus(), 1, environment.MAX_THREADS)


def usable_cpus() -> int:
  """The CPUs this process may run on (its affinity where the OS has one)."""
  try: return max(1, len(os.sched_getaffinity(0)))
  except (AttributeError, OSError): return max(1, os.cpu_count() or 1)


def table_device(name: str) -> Device:
  """The device row `name` of spec/render.yaml `device_tables` (its key or an alias, any
  case; KeyError for another name)."""
  rows = render_tables().get("device_tables", {})
  key = environment.table_key(name, rows)
  if key is None: raise KeyError(f"no device table {name!r} (spec/render.yaml device_tables: {', '.join(sorted(rows))})")
  R = rows[key]
  T = render_tables()["devices"][R["target"]]
  return Device(R["target"], R["name"], R["kind"], int(R["compute_units"]), int(R["local_mem"]), int(R["max_local"]), bool(T["tensor_cores"]),
                vector_bytes(R["target"], R["kind"], int(R["vector_bytes"])), int(R.get("warp", 1)), float(R.get("peak_gflops", 0)), float(R.get("peak_gbs", 0)))


def _table_row(name: str) -> dict | None:
  """The device_tables row whose key the device's name contains ("h100" in "NVIDIA H100 80GB HBM3")."""
  rows = render_tables().get("device_tables", {})
  return next((r for k, r in rows.items() if k.lower() in name.lower()), None)


def _nvidia_warp(d) -> int:
  """The warp width an OpenCL device reports through cl_nv_device_attribute_query (else 1)."""
  try: return int(d.warp_size_nv)
  except Exception: return 32 if "NVIDIA" in (d.vendor or "") else 64 if "Advanced Micro" in (d.vendor or "") else 1


@lru_cache(maxsize=None)
def device(target: str) -> Device:
  want = os.environ.get("TINYSPEC_OPENCL_DEVICE", "")
  if target == "opencl" and want.startswith("table:"):
    return table_device(environment.device_table(want[len("table:"):], render_tables().get("device_tables", {})))
  T = render_tables()["devices"][target]
  if target == "c":
    return Device("c", _cpu_name(), T["kind"], host_threads(), int(T.get("local_mem", 0)), int(T.get("max_local", 0)), bool(T["tensor_cores"]),
                  vector_bytes("c", T["kind"], _cpu_vector_bytes()), cache_bytes=_cpu_cache_bytes())
  try:
    import pyopencl as cl  # noqa: PLC0415 (pyopencl: an optional dependency (tinyspec[opencl]))
    _, _, d = cl_device()
    kind = "cpu" if d.type & cl.device_type.CPU else "gpu"
    row = _table_row(d.name) if kind == "gpu" else None
    # a GPU's preferred vector width says little (NVIDIA reports 1, yet its 128-bit loads
    # move the most per instruction): a described GPU takes its table's width and peaks
    vb = int(row["vector_bytes"]) if row else 4 * max(1, int(d.preferred_vector_width_float))
    return Device("opencl", d.name.strip(), kind, int(d.max_compute_units), int(d.local_mem_size), int(d.max_work_group_size), bool(T["tensor_cores"]),
                  vector_bytes("opencl", kind, vb), _nvidia_warp(d) if kind == "gpu" else 1,
                  float(row.get("peak_gflops", 0)) if row else 0.0, float(row.get("peak_gbs", 0)) if row else 0.0)
  except Exception:   # no OpenCL here: compile for the table's generic device
    return Device("opencl", "generic", T["kind"], 1, int(T["local_mem"]), int(T["max_local"]), bool(T["tensor_cores"]))
