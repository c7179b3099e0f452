"""The limits of spec/ops.yaml `limits:` as numbers, and the memory this process may use.

Every limit is enforced where data enters: graph files (tinyspec/graph.py: bytes, nodes,
nesting, string and integer lengths), shapes (the validator: elements and rank), input
arrays (tinyspec/files.py: .npy headers), protocol lines (conformance/run/protocol.py),
diagnostics (capped, with a count of the rest) and time (tinyspec/deadline.py).

The memory budget (what loading, evaluating and running may hold) is a quarter of the
memory this process may use: the smallest of physical RAM, what RLIMIT_AS (`ulimit -v`)
leaves of the address space, and what the cgroup's memory limit leaves of the group's
use. TINYSPEC_EVAL_BUDGET (bytes, or with a K/M/G/T suffix) sets it instead.
"""
from __future__ import annotations
import os
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace
from tinyspec.tables import tables

_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_UNLIMITED = 1 << 62


@lru_cache(maxsize=None)
def limits() -> SimpleNamespace:
  """spec/ops.yaml `limits:` with every value as an int (limits().max_nodes ...)."""
  return SimpleNamespace(**tables().limit_values)


# ------------------------------------------------------------------ memory
def physical_memory() -> int:
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    return _meminfo("MemTotal:") or 8 << 30


def _meminfo(field: str) -> int | None:
  try:
    with open("/proc/meminfo") as f:
      for line in f:
        if line.startswith(field): return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError): pass
  return None


def address_space_left() -> int:
  """What RLIMIT_AS leaves of the address space (unlimited: a huge number)."""
  try:
    import resource  # noqa: PLC0415 (resource: Unix only)
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
  except (ImportError, OSError, ValueError): return _UNLIMITED
  if soft == resource.RLIM_INFINITY or soft < 0: return _UNLIMITED
  return max(0, soft - _mapped())


def _mapped() -> int:
  """Bytes of address space this process has mapped (VmSize)."""
  try:
    with open("/proc/self/status") as f:
      for line in f:
        if line.startswith("VmSize:"): return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError): pass
  return 0


def cgroup_memory_left(root: Path | str = "/sys/fs/cgroup", proc_cgroup: Path | str = "/proc/self/cgroup") -> int:
  """What the memory limit of this process's cgroup (v2 memory.max, v1
  memory.limit_in_bytes) leaves of the group's current use; a huge number without one."""
  root = Path(root)
  try: lines = Path(proc_cgroup).read_text().splitlines()
  except OSError: return _UNLIMITED
  left = _UNLIMITED
  for line in lines:
    parts = line.split(":", 2)
    if len(parts) != 3: continue
    _, controllers, path = parts
    rel = path.lstrip("/")
    if controllers == "":        # cgroup v2
      cands = [(root / rel, "memory.max", "memory.current"), (root / "unified" / rel, "memory.max", "memory.current")]
    elif "memory" in controllers.split(","):
      cands = [(root / "memory" / rel, "memory.limit_in_bytes", "memory.usage_in_bytes")]
    else: continue
    for d, lim_name, use_name in cands:
      lim = _read_int(d / lim_name)
      if lim is None or lim >= _UNLIMITED: continue
      left = min(left, max(0, lim - (_read_int(d / use_name) or 0)))
  return left


def _read_int(p: Path) -> int | None:
  try: text = p.read_text().strip()
  except OSError: return None
  if text == "max": return _UNLIMITED
  try: return int(text)
  except ValueError: return None


def memory_available() -> int:
  """The memory this process may use: the smallest of physical RAM, what RLIMIT_AS leaves
  and what the cgroup's limit leaves."""
  return min(physical_memory(), address_space_left(), cgroup_memory_left())


def parse_bytes(text) -> int:
  """'2G', '512M', '1000000' -> bytes; ValueError with a usable message otherwise."""
  s = str(text).strip().upper().removesuffix("B").removesuffix("I")
  unit = s[-1] if s and s[-1] in _SUFFIX else ""
  num = s[:-1] if unit else s
  try: n = float(num)
  except ValueError: raise ValueError(f"cannot read {text!r} as a number of bytes (e.g. 2G, 512M, 1000000)") from None
  if not n > 0 or n == float("inf"): raise ValueError(f"a memory budget must be a positive number of bytes, not {text!r}")
  return int(n * _SUFFIX[unit])


def default_budget() -> int:
  """TINYSPEC_EVAL_BUDGET, else a quarter of memory_available()."""
  env = os.environ.get("TINYSPEC_EVAL_BUDGET")
  if env: return parse_bytes(env)
  return memory_available() // 4
