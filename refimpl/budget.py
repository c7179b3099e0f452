"""The memory budget: evaluation refuses, with an EvalError naming the node, a value that
would not fit, instead of being killed by the operating system.

Default: a quarter of physical memory; TINYSPEC_EVAL_BUDGET (bytes, or with a K/M/G/T
suffix) or evaluate(budget=...) override it. What is counted is the memory the evaluator
itself holds alive: every array it allocated (by the array that owns the memory, so a
view -- a broadcast EXPAND, a PERMUTE -- costs nothing beyond its base) from allocation
until it is garbage (a finalizer subtracts it), plus, before each node runs, an estimate
of what that node will allocate. The caller's input arrays are not counted. Arrays under
4 KiB are not tracked (their bookkeeping would cost more than they do).
"""
from __future__ import annotations
import os
import weakref
import numpy as np
from tinyspec.refimpl.errors import EvalError

SMALL = 4096
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def physical_memory() -> int:
  try:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
  except (ValueError, OSError, AttributeError):
    try:
      with open("/proc/meminfo") as f:
        for line in f:
          if line.startswith("MemTotal:"): return int(line.split()[1]) * 1024
    except OSError: pass
  return 8 << 30


def parse_bytes(text) -> int:
  s = str(text).strip().upper().removesuffix("B").removesuffix("I")
  unit = s[-1] if s and s[-1] in _SUFFIX else ""
  num = s[:-1] if unit else s
  try: n = float(num)
  except ValueError: raise EvalError(f"cannot read {text!r} as a number of bytes (e.g. 2G, 512M, 1000000)", rule="eval.budget", exit_code=2) from None
  if n <= 0: raise EvalError(f"the memory budget must be positive, not {text!r}", rule="eval.budget", exit_code=2)
  return int(n * _SUFFIX[unit])


def default_budget() -> int:
  env = os.environ.get("TINYSPEC_EVAL_BUDGET")
  if env: return parse_bytes(env)
  return physical_memory() // 4


def owner(a):
  """The object that owns a's memory (NumPy views point to it through .base)."""
  b = a
  while getattr(b, "base", None) is not None: b = b.base
  return b


class Budget:
  def __init__(self, limit=None):
    self.limit = default_budget() if limit is None else (parse_bytes(limit) if isinstance(limit, str) else int(limit))
    self.live = 0
    self.peak = 0
    self._tracked: set[int] = set()
    self._external: set[int] = set()

  def external(self, a) -> None:
    """Mark a caller-owned array: never counted."""
    self._external.add(id(owner(a)))

  def need(self, nbytes: int, node=None, op=None, what="its value") -> None:
    if self.live + nbytes > self.limit:
      raise EvalError(f"{what} needs {nbytes:,} bytes with {self.live:,} already live, over the memory budget of "
                      f"{self.limit:,} bytes (set evaluate(budget=...) or TINYSPEC_EVAL_BUDGET)", node, op, rule="eval.budget")

  def track(self, a) -> None:
    if not isinstance(a, np.ndarray): return
    b = owner(a)
    if not isinstance(b, np.ndarray) or b.nbytes < SMALL: return
    k = id(b)
    if k in self._tracked or k in self._external: return
    self._tracked.add(k)
    n = b.nbytes
    self.live += n
    if self.live > self.peak: self.peak = self.live
    weakref.finalize(b, self._release, k, n)

  def _release(self, k, n) -> None:
    self._tracked.discard(k)
    self.live -= n
