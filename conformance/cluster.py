"""The searches' work on Dask distributed: one code path for one machine and a hundred.

    with Cluster(address, workers=2) as c:        # address None: an embedded LocalCluster of `workers`
      c.run(fn, units, done)                      # fn(unit, *args) on the workers; done(unit, result) here

A search (`tinyspec fuzz --sanitize`, the tinygrad campaign) is cut into units, each
(family or device, seed, share): what a unit draws depends on those alone, so the same
--seed and --examples give the same examples on one process, on N processes and on a
cluster, and a unit that runs twice (its worker was killed: Dask runs it again elsewhere)
gives the same result, counted once (`done` is called once per unit, here). Results are
merged by the caller in the units' order, not in the order they finish.

Where the work runs (open_cluster): `--scheduler ADDRESS`, else $TINYSPEC_SCHEDULER, else
[tool.tinyspec] scheduler (scheduler_address); without one an embedded LocalCluster of
--jobs/--workers processes, and for one job no cluster at all: the same unit functions
called here, one after another (Here: starting a LocalCluster costs a second or two, more
than many short runs take). A worker says what it has as Dask
resources (`dask worker --resources "tinygrad.CUDA=1"`); a probe (Cluster.declare) adds
what tinyspec sees there itself (a worker plugin, so a worker that joins or restarts later
declares it too). A unit that needs a tag runs only where a worker has it; a tag that no
worker has is said once by the caller (Cluster.missing).

A scheduler that goes away ends the run with ClusterLost (rule cluster.lost, exit
EXIT_LOST): what finished before is the caller's to keep. One that does not answer at
the start is ClusterUnreachable (rule cluster.unreachable).
"""
from __future__ import annotations
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from concurrent.futures import CancelledError
import importlib.util
from tinyspec.deadline import kill_children

SCHEDULER_ENV = "TINYSPEC_SCHEDULER"
EXIT_LOST = 3                 # the run stopped because its scheduler went away (what it found is kept)
LOST_AFTER = 20.0             # seconds to reach the scheduler (at the start: else ClusterUnreachable; Dask's connections after)
WAIT_STEP = 2.0               # how often the wait for results wakes (progress line, scheduler check)
ORPHAN_AFTER = 60.0           # seconds units may wait for a tag no worker has any more (its workers died) before the run ends


@dataclass(frozen=True)
class Unit:
  """One piece of a search: its kind (the function that runs it), family or device, seed,
  share (examples or programs) and place in the plan. `needs`: a resource tag the worker
  must have (None: any worker)."""
  kind: str
  name: str
  seed: int
  share: int
  index: int
  needs: str | None = None

  @property
  def key(self) -> str:
    """The unit's name in Dask and in the findings database (the same unit, the same key)."""
    return f"tinyspec-{self.kind}-{self.name}-s{self.seed}-n{self.share}-i{self.index}"


def split(total: int, size: int) -> list[int]:
  """`total` cut into the fewest shares of at most `size`, as even as can be (the first
  ones take the remainder)."""
  if total <= 0: return []
  k = -(-total // size)
  per, extra = divmod(total, k)
  return [per + (i < extra) for i in range(k)]


class ClusterLost(RuntimeError):
  """The scheduler went away during a run, or a unit ended every worker that ran it."""
  rule = "cluster.lost"


class ClusterUnreachable(RuntimeError):
  """No scheduler answers at the address given (before any work)."""
  rule = "cluster.unreachable"


def scheduler_address(given: str | None, settings=None) -> tuple[str | None, str]:
  """(the scheduler's address or None, where it came from): --scheduler, else
  $TINYSPEC_SCHEDULER, else [tool.tinyspec] scheduler."""
  if given: return given, "--scheduler"
  env = os.environ.get(SCHEDULER_ENV, "").strip()
  if env: return env, f"${SCHEDULER_ENV}"
  s = getattr(settings, "scheduler", None)
  if s: return s, settings.where()
  return None, "embedded"


# ------------------------------------------------------------------ progress
@dataclass
class Progress:
  """The progress line on stderr (total: the units planned, 0 when the plan has no end): units done, examples per second per worker, findings so
  far, elapsed, and the Dask dashboard's address where there is one. Redrawn in place on
  a terminal; a plain line every `every` seconds when asked for without one."""
  total: int
  label: str
  dashboard: str | None = None
  enabled: bool | None = None
  every: float = 30.0
  stream: object = None
  done: int = 0
  findings: int = 0
  per_worker: dict = field(default_factory=dict)   # worker -> examples
  t0: float = field(default_factory=time.monotonic)
  last: float = 0.0
  shown: int = -1                                  # units done when the line was last written

  def __post_init__(self):
    self.stream = self.stream or sys.stderr
    self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
    self.on = self.tty if self.enabled is None else self.enabled

  def unit_done(self, worker: str, examples: int, findings: int) -> None:
    self.done += 1
    self.findings += findings
    self.per_worker[worker] = self.per_worker.get(worker, 0) + examples
    self.show()

  def line(self) -> str:
    t = max(time.monotonic() - self.t0, 1e-9)
    rates = ", ".join(f"{_short(w)} {n / t:.1f}/s" for w, n in sorted(self.per_worker.items())) or "none yet"
    of = f"/{self.total}" if self.total else ""
    return (f"{self.label}: {self.done}{of} units, {sum(self.per_worker.values())} examples "
            f"({rates}), {self.findings} findings, {t:.0f} s" + (f", dashboard {self.dashboard}" if self.dashboard else ""))

  def show(self, force: bool = False) -> None:
    if not self.on: return
    now = time.monotonic()
    if self.tty: self.stream.write("\r\033[K" + self.line())
    elif force or now - self.last >= self.every or (self.done == self.total and self.shown != self.done):
      self.stream.write(self.line() + "\n")
    else: return
    self.last, self.shown = now, self.done
    self.stream.flush()

  def close(self) -> None:
    if self.on and self.tty: self.stream.write("\n"); self.stream.flush()


def _short(worker: str) -> str:
  """A worker's address without its scheme (tcp://127.0.0.1:4000 -> 127.0.0.1:4000), or its name."""
  return worker.split("://", 1)[-1]


# ------------------------------------------------------------------ where the units run
def open_cluster(address: str | None = None, workers: int = 1, resources: dict | None = None):
  """The Dask scheduler at `address`; without one an embedded LocalCluster of `workers`
  processes, or for one worker Here (this process). Use it as a context manager."""
  if address is None and int(workers) <= 1: return Here(resources)
  return Cluster(address, workers, resources)


class Here:
  """The units run in this process, one after another, in the plan's order: what one job
  without a scheduler is (Cluster's interface, no Dask). `resources` and what the probe
  names here are the tags this process has."""
  address = None
  dashboard = None

  def __init__(self, resources: dict | None = None):
    self.have = {t for t, q in (resources or {}).items() if q > 0}

  def __enter__(self) -> "Here": return self

  def __exit__(self, *exc) -> None: pass

  def wait_for_workers(self) -> None: pass

  def declare(self, probe, name: str) -> None:
    try: self.have |= set(probe())
    except Exception as e:   # as on a worker: a probe that fails declares nothing
      logging.getLogger("tinyspec").warning(f"tinyspec: probe {name} failed here: {e}")

  def tags(self) -> dict: return {"local": {t: 1 for t in sorted(self.have)}}

  def threads(self) -> int: return 1

  def missing(self, needs) -> list[str]:
    return sorted({n for n in needs if n is not None and n not in self.have})

  def everywhere(self, fn) -> None: fn()

  def run(self, fn, units, done, *args, progress: Progress | None = None, stop=None, window: int | None = None) -> None:
    """fn(unit, *args) for each unit in order, here; done(unit, result) after each (Cluster.run)."""
    for u in units:
      done(u, fn(u, *args))
      if progress is not None: progress.show()
      if stop is not None and stop(): return


@contextlib.contextmanager
def _children_ignore_sigint():
  """The worker processes started inside ignore SIGINT: Ctrl-C in a terminal reaches the
  whole process group, and it is the command that ends the run (its workers closed, their
  backends killed), not each worker with a traceback of its own. An ignored signal stays
  ignored in a spawned process, and Python (and asyncio) install no KeyboardInterrupt handler
  then. (A Ctrl-C in the second or two the workers take to start is not seen.)"""
  if threading.current_thread() is not threading.main_thread():
    yield; return
  before = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try: yield
  finally: signal.signal(signal.SIGINT, before)


class Cluster:
  """A Dask client: on the scheduler at `address`, or on an embedded LocalCluster of
  `workers` (one: a worker thread in this process; more: that many worker processes,
  one thread each)."""

  def __init__(self, address: str | None = None, workers: int = 1, resources: dict | None = None):
    self.address, self.workers, self.resources = address, max(1, int(workers)), resources or {}
    self.client = self.local = None

  def __enter__(self) -> "Cluster":
    import dask  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    from distributed import Client, LocalCluster  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    # (a lost scheduler is given LOST_AFTER seconds to come back; the workers' own logs stay quiet)
    self._config = dask.config.set({"distributed.comm.timeouts.connect": f"{int(LOST_AFTER)}s",
                                    "distributed.scheduler.worker-ttl": None, "logging.distributed": "error"})
    self._config.__enter__()
    self._levels = _quiet_logs()
    if self.address is not None:
      try: self.client = _connect(self.address)
      except Exception as e:   # refused, silent, or something else answering there (a garbage handshake)
        self.__exit__(None, None, None)
        raise ClusterUnreachable(f"no Dask scheduler answers at {self.address}: {type(e).__name__}: {e}"[:400]) from None
    else:
      with _children_ignore_sigint():
        self.local = LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=self.workers > 1,
                                  resources=self.resources or None, dashboard_address=":0",
                                  silence_logs=logging.CRITICAL, scheduler_port=0)
      self.client = Client(self.local, set_as_default=False)
    return self

  def __exit__(self, *exc) -> None:
    try:
      if exc[0] is not None and self.local is not None and self.client is not None:
        # an interrupted run: the embedded workers go with it, and so do the backends and
        # compilers they started (each in a process group of its own)
        self.client.run(kill_children)
      if self.client is not None: self.client.close(timeout=5)
      if self.local is not None: self.local.close(timeout=10)
    except Exception:   # a scheduler already gone: nothing left to close
      pass
    finally:
      self._config.__exit__(None, None, None)
      for name, level in self._levels.items(): logging.getLogger(name).setLevel(level)

  @property
  def dashboard(self) -> str | None:
    """The dashboard's address when the scheduler serves one (its pages need bokeh there)."""
    try:
      if not (self.client.scheduler_info().get("services") or {}).get("dashboard"): return None
      if not self.client.run_on_scheduler(_has_bokeh): return None
      return self.client.dashboard_link
    except Exception:
      return None

  def wait_for_workers(self) -> None:
    """At least one worker (ClusterUnreachable when none joins in LOST_AFTER seconds)."""
    try: self.client.wait_for_workers(1, timeout=LOST_AFTER)
    except TimeoutError:
      raise ClusterUnreachable(f"no Dask worker has joined the scheduler at {self.address} in {LOST_AFTER:.0f} s "
                               "(start some: dask worker ADDRESS)") from None

  def declare(self, probe, name: str) -> None:
    """Each worker declares the tags probe() names there (Declare)."""
    from dask.base import tokenize  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    from tinyspec.conformance.cluster_plugin import Declare  # noqa: PLC0415 (it imports dask: only a cluster needs it)
    # (named by what it probes: a plugin of that name is not registered again, so another
    # run's probe, with other backends, is another plugin)
    self.client.register_plugin(Declare(probe, name), name=f"tinyspec-{name}-{tokenize(probe)[:12]}")

  def tags(self) -> dict:
    """worker address -> {resource tag: quantity} as the scheduler knows them now."""
    return {w: dict(d.get("resources") or {}) for w, d in self.client.scheduler_info(n_workers=-1)["workers"].items()}

  def everywhere(self, fn) -> None:
    """fn() on every worker (beside its units: what they kept between units, such as child processes)."""
    self.client.run(fn)

  def threads(self) -> int:
    """The worker threads the scheduler knows now."""
    return sum(d.get("nthreads", 1) for d in self.client.scheduler_info(n_workers=-1)["workers"].values())

  def missing(self, needs) -> list[str]:
    """The tags of `needs` that no worker has."""
    have = {t for res in self.tags().values() for t, q in res.items() if q > 0}
    return sorted({n for n in needs if n is not None and n not in have})

  def run(self, fn, units, done, *args, progress: Progress | None = None, stop=None, window: int | None = None) -> None:
    """fn(unit, *args) for every unit (an iterable, endless too) on the workers; done(unit,
    result) here, once per unit, as each finishes. window: units in flight at most (None:
    all at once). stop(): True once the caller wants no more (the units in flight are
    cancelled, no more are taken). ClusterLost when the scheduler goes away."""
    from dask.base import tokenize  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    from distributed.client import _wait  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    token = tokenize(fn.__module__, fn.__qualname__, *args)[:12]   # another run's units (other arguments) are other tasks
    todo, futures, pending, finished_n = iter(units), {}, set(), [0]
    orphaned: dict = {}   # tag -> since when the units that need it have had no worker

    def top_up():
      while window is None or len(pending) < window:
        u = next(todo, None)
        if u is None: return
        f = self.client.submit(fn, u, *args, key=f"{u.key}-{token}", resources={u.needs: 1} if u.needs else None, pure=False)
        futures[f] = u
        pending.add(f)

    try:
      top_up()
      while pending:
        try: finished, rest = self.client.sync(_wait, list(pending), timeout=WAIT_STEP, return_when="FIRST_COMPLETED")
        except TimeoutError: finished, rest = set(), pending
        pending.intersection_update(rest)
        self._check_alive(finished_n[0])
        self._check_orphans({futures[f].needs for f in pending}, orphaned, finished_n[0])
        for f in finished:
          if f.status == "cancelled": raise ClusterLost(self._lost_text(finished_n[0]))
          if f.status == "error" and type(f.exception()).__name__ == "KilledWorker":   # (every retry's worker died)
            raise ClusterLost(f"unit {futures[f].key} ended every worker that ran it (out of memory, or killed): "
                              f"{str(f.exception())[:300]}; {finished_n[0]} units had finished")
          done(futures[f], f.result())
          finished_n[0] += 1
        if progress is not None: progress.show()
        if stop is not None and stop():
          if pending: self.client.cancel(list(pending))
          return
        top_up()
    except (CancelledError, OSError) as e:   # (Dask's Future(s)CancelledError: the scheduler's connection lost)
      if isinstance(e, OSError) and self.client.status == "running": raise
      raise ClusterLost(self._lost_text(finished_n[0])) from None
    finally:
      for f in futures: f.release()

  def _check_orphans(self, needs: set, orphaned: dict, finished: int) -> None:
    """ClusterLost when units have waited ORPHAN_AFTER seconds for a tag that no worker has
    any more (every worker that had it died and none came back)."""
    gone = set(self.missing(needs)) if any(needs) else set()
    now = time.monotonic()
    for tag in list(orphaned):
      if tag not in gone: del orphaned[tag]
    for tag in gone:
      if now - orphaned.setdefault(tag, now) > ORPHAN_AFTER:
        raise ClusterLost(f"no worker has {tag} any more (those that had it left {ORPHAN_AFTER:.0f} s ago); {finished} units had finished")

  def _check_alive(self, finished: int) -> None:
    if self.client.status in ("closed", "closing", "failed"):
      raise ClusterLost(self._lost_text(finished))

  def _lost_text(self, finished: int) -> str:
    where = self.address or "the embedded LocalCluster"
    return f"the Dask scheduler at {where} went away after {finished} units had finished"


def _connect(address: str):
  """A Dask client of the scheduler at `address`. One that fails to start is closed here:
  left to the garbage collector, it would wait twice LOST_AFTER to close a connection that
  never opened, and say so on stderr."""
  from distributed import Client  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
  made: list = []

  class Tracked(Client):
    def start(self, **kwargs):
      made.append(self)
      return super().start(**kwargs)

  try: return Tracked(address, timeout=f"{int(LOST_AFTER)}s", set_as_default=False)
  except BaseException:
    for c in made:
      try: c.close(timeout=2)
      except Exception: c.status = "closed"   # (what its __del__ checks)
    raise


def _quiet_logs() -> dict:
  """Dask's and its event loop's loggers silenced (a lost scheduler is said once, by the
  caller, not as a page of tracebacks); their levels before, to put back."""
  names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in ("distributed", "tornado", "asyncio")]
  before = {n: logging.getLogger(n).level for n in {*names, "distributed", "tornado", "asyncio"}}
  for n in before: logging.getLogger(n).setLevel(logging.CRITICAL + 1)
  return before


def _has_bokeh() -> bool:
  return importlib.util.find_spec("bokeh") is not None


def worker_name() -> str:
  """The address of the Dask worker running the caller, or `local`."""
  try:
    from distributed import get_worker  # noqa: PLC0415 (dask: 0.3 s to import; only a cluster needs it)
    return get_worker().address
  except (ImportError, ValueError):
    return "local"
