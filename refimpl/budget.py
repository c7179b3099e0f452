"""The memory budget: evaluation refuses, with an EvalError naming the node, a value that
would not fit, instead of being killed by the operating system.

Default: a quarter of the memory this process may use (tinyspec.limits.default_budget: the
smallest of physical RAM, what RLIMIT_AS leaves and what the cgroup's limit leaves);
TINYSPEC_EVAL_BUDGET (bytes, or with a K/M/G/T suffix) or evaluate(budget=...) override
it; an evaluation reuses the memory figure another one read less than RECENT_S (1 s)
before. What is counted: the input arrays (their owners' bytes, once each, from the start),
every array the evaluator allocated (by the array that owns the memory, so a view -- a
broadcast EXPAND, a PERMUTE -- costs nothing beyond its base) from allocation until it
is garbage (a finalizer subtracts it), plus, before each node runs, an estimate of what
that node will allocate. Arrays under 4 KiB are not tracked (their bookkeeping would
cost more than they do).
"""
from __future__ import annotations
import os
import time
import weakref
import numpy as np
from tinyspec import limits as _limits
from tinyspec.refimpl.errors import EvalError

SMALL = 4096
physical_memory = _limits.physical_memory


def parse_bytes(text) -> int:
  try: return _limits.parse_bytes(text)
  except ValueError as e: raise EvalError(str(e), rule="eval.budget", exit_code=2) from None


def default_budget() -> int:
  try: return _limits.default_budget()
  except ValueError as e: raise EvalError(f"TINYSPEC_EVAL_BUDGET: {e}", rule="eval.budget", exit_code=2) from None


RECENT_S = 1.0   # how long an evaluation may reuse the memory figure an earlier one read
_recent: list = [None, -RECENT_S - 1.0]


def recent_default_budget() -> int:
  """default_budget() for an evaluation: TINYSPEC_EVAL_BUDGET as set now, else the quarter of
  the available memory read at most RECENT_S seconds ago (reading the cgroup's files costs
  about as much as evaluating a small kernel; what is available barely moves in a second)."""
  if os.environ.get("TINYSPEC_EVAL_BUDGET"): return default_budget()
  now = time.monotonic()
  if _recent[0] is None or now - _recent[1] > RECENT_S: _recent[:] = [default_budget(), now]
  return _recent[0]


def owner(a):
  """The object that owns a's memory (NumPy views point to it through .base)."""
  b = a
  while getattr(b, "base", None) is not None: b = b.base
  return b


class Budget:
  def __init__(self, limit=None):
    self.limit = recent_default_budget() if limit is None else (parse_bytes(limit) if isinstance(limit, str) else int(limit))
    self.live = 0
    self.peak = 0
    self._tracked: dict = {}   # id of a tracked array -> the weak reference whose callback subtracts it
    self._sizes: dict = {}     # id of that weak reference (alive as long as it is listed) -> (array id, bytes)
    self._external: set[int] = set()

  def external(self, a, what: str = "the inputs") -> None:
    """Count a caller-owned array (an input) once, for the whole evaluation: it is alive
    as long as the caller holds it."""
    b = owner(a)
    k = id(b)
    if k in self._external or k in self._tracked: return
    self._external.add(k)
    n = b.nbytes if isinstance(b, np.ndarray) else getattr(a, "nbytes", 0)
    self.need(n, what=what)
    self.live += n
    if self.live > self.peak: self.peak = self.live

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
    n = b.nbytes
    # a plain weak reference, its callback run when b is freed (weakref.finalize costs four
    # times as much, and its registry would keep the budget alive as long as any output)
    r = weakref.ref(b, self._freed)
    self._tracked[k] = r
    self._sizes[id(r)] = (k, n)
    self.live += n
    if self.live > self.peak: self.peak = self.live

  def _freed(self, r) -> None:
    k, n = self._sizes.pop(id(r))
    self._tracked.pop(k, None)
    self.live -= n
