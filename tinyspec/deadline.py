"""Time limits: `--timeout S` of validate, props, show, eval, compile and run (default
limits.timeout; 0: none).

Two layers, because Python can only stop Python:
  * soft: an interval timer (SIGALRM) raises TimeLimit in the main thread at its next
    bytecode, so the validator, the evaluator's loops and the compiler's passes stop
    there and the command exits 1 with rule run.timeout;
  * hard: when the command owns its process (the console script), a watchdog thread
    ends the process GRACE seconds later if the soft limit could not act (one long
    NumPy call or compiled kernel holds the main thread): it prints the same message,
    kills the process groups of the children it knows (compilers, backends) and exits 1.
Subprocesses (the C compiler) get the time that is left (remaining()).
"""
from __future__ import annotations
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
import argparse
from tinyspec.limits import limits

GRACE = 5.0
_state: dict[str, float | None] = {"deadline": None}
_children: set[int] = set()    # process group ids to kill when the process is ended
_lock = threading.Lock()


class TimeLimit(BaseException):
  """The command ran past its time limit (a BaseException: no `except Exception` of the
  code it interrupts may swallow it)."""
  def __init__(self, seconds: float):
    super().__init__(f"stopped after {seconds:g} s (--timeout) [run.timeout]")
    self.seconds = seconds


def remaining() -> float | None:
  """Seconds left before the current limit (None: no limit)."""
  d = _state["deadline"]
  return None if d is None else max(0.0, d - time.monotonic())


def track_child(pgid: int) -> None:
  with _lock: _children.add(pgid)


def untrack_child(pgid: int) -> None:
  with _lock: _children.discard(pgid)


def kill_children() -> None:
  """SIGKILL every process group a child was started in (backends, compilers)."""
  with _lock: groups = list(_children); _children.clear()
  for g in groups:
    try: os.killpg(g, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError): pass


def seconds(text) -> float:
  """--timeout's argument: seconds >= 0 (0: no limit)."""
  try: v = float(text)
  except ValueError: raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
  if not v >= 0 or v == float("inf"): raise argparse.ArgumentTypeError(f"seconds must be >= 0 (0: no limit), not {text!r}")
  return v


def add_option(p) -> None:
  """The --timeout option of a command (dest `time_limit`)."""
  p.add_argument("--timeout", dest="time_limit", type=seconds, default=None, metavar="S",
                 help="stop after S seconds with exit 1 [run.timeout] (default: limits.timeout of spec/ops.yaml; 0: no limit)")


def default_seconds() -> float:
  return float(limits().timeout)


@contextmanager
def time_limit(limit: float | None, hard: bool = False, label: str = "tinyspec"):
  """Run the body under a limit of `limit` seconds (None or 0: none). hard=True also arms
  the watchdog that ends the process (only for a process the command owns)."""
  if not limit or threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
    yield; return
  def on_alarm(signum, frame): raise TimeLimit(limit)
  old = signal.signal(signal.SIGALRM, on_alarm)
  signal.setitimer(signal.ITIMER_REAL, limit)
  _state["deadline"] = time.monotonic() + limit
  dog = _Watchdog(limit, label) if hard else None
  try:
    yield
  finally:
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, old)
    _state["deadline"] = None
    if dog is not None: dog.disarm()


class _Watchdog:
  def __init__(self, limit: float, label: str):
    self.limit, self.label = limit, label
    self.done = threading.Event()
    threading.Thread(target=self._watch, name="tinyspec-watchdog", daemon=True).start()

  def disarm(self): self.done.set()

  def _watch(self):
    if self.done.wait(self.limit + GRACE): return
    try:
      sys.stderr.write(f"{self.label}: stopped after {self.limit:g} s (--timeout; a long native call did not return) [run.timeout]\n")
      sys.stderr.flush()
    finally:
      kill_children()
      os._exit(1)


# ------------------------------------------------------------------ SIGTERM
class Terminated(BaseException):
  """SIGTERM arrived (raised in the main thread, as KeyboardInterrupt is for SIGINT)."""
  exit_code = 143


@contextmanager
def sigterm_raises():
  """Within the body SIGTERM raises Terminated in the main thread, so a run can stop its
  backends and say what it did before exiting 143."""
  if threading.current_thread() is not threading.main_thread():
    yield; return
  def on_term(signum, frame): raise Terminated()
  old = signal.signal(signal.SIGTERM, on_term)
  try: yield
  finally: signal.signal(signal.SIGTERM, old)
