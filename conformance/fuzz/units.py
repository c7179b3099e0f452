"""Running a search's units (conformance/cluster.py) with its findings database
(conformance/findings.py): what `tinyspec fuzz --sanitize` and the tinygrad campaign share.

    ran = run_units(plan, fn, args, hunt="sanitize seed=0 ...", db=path, scheduler=None, jobs=2)
    ran.results     # unit key -> result (this run's, and the stored ones of a resumed run)
    ran.lost        # ClusterLost when the scheduler went away (ran.results: what finished before)
    ran.missing     # resource tags no worker has (their units did not run), each said once

fn(unit, examples, *args) runs on a worker; `examples` is the snapshot of Hypothesis's
entries (database_key -> entries, findings.Findings.examples: other hunts' only).
Its result is a dict with at least `examples` (checked), `worker`, `saved` (Hypothesis
entries it saved) and `findings` (the JSON of each distinct finding, findings.record's
form): `stored_part(result)` is what the database keeps of it (JSON only).
"""
from __future__ import annotations
import sys
from dataclasses import dataclass, field
from pathlib import Path
import argparse
from tinyspec.conformance.cluster import ClusterLost, Progress, open_cluster, scheduler_address, EXIT_LOST
from tinyspec.conformance.findings import Findings
from tinyspec.environment import scheduler, EnvironmentValue
from tinyspec.conformance.run.settings import load_settings
from tinyspec.files import make_dir, printable
from tinyspec.deadline import kill_children, Terminated


@dataclass
class Ran:
  results: dict = field(default_factory=dict)
  order: list = field(default_factory=list)   # the units taken from the plan (run or resumed), in its order: how results merge
  lost: ClusterLost | None = None
  missing: list = field(default_factory=list)
  resumed: int = 0                     # units whose stored result was taken (not run again)
  dashboard: str | None = None


def database_key(unit) -> bytes:
  """The Hypothesis key of a unit's searches: its kind and family or device (not its seed:
  a failing example replays in every later search of that family)."""
  return f"tinyspec/{unit.kind}/{unit.name}".encode()


def stored_part(result: dict) -> dict:
  """What the database keeps of a result: its JSON parts (a live Failure stays here)."""
  return {k: v for k, v in result.items() if k != "live"}


def run_units(plan, fn, args: tuple, hunt: str, db: Path | None = None, scheduler: str | None = None, jobs: int = 1,
              probe=None, progress: bool | None = None, stop=None, label: str = "fuzz", resources: dict | None = None,
              cleanup=None, sample=None, window: int | str | None = None, on_done=None) -> Ran:
  """Every unit of `plan` (a list, or an endless iterable with `sample`: a unit of each kind
  and family or device it has, and `window`: units in flight, "auto": twice the workers'
  threads) not finished before (in the database, for this hunt) through fn on the
  cluster; each result recorded in the database as it arrives, then on_done(unit, result).
  stop(results): True once no more are wanted. cleanup(): run on every worker at the end
  (what fn kept between units, such as child processes)."""
  ran = Ran()
  book = Findings(db) if db is not None else None
  try:
    stored = book.done_units(hunt) if book is not None else {}
    sample = plan if sample is None else sample
    keys = sorted({database_key(u) for u in sample})
    snapshot = {k: book.examples(k, hunt) if book is not None else [] for k in keys}
    if isinstance(plan, list): jobs = min(jobs, max(1, len(plan)))   # (no more processes than units)
    with open_cluster(scheduler, jobs, resources) as c:
      c.wait_for_workers()
      if probe is not None: c.declare(probe, label)
      ran.dashboard = c.dashboard
      ran.missing = c.missing({u.needs for u in sample})
      if all(u.needs in ran.missing for u in sample): return ran   # (nothing can run: an endless plan would never end)
      bar = Progress(len(plan) if isinstance(plan, list) else 0, label, ran.dashboard, progress)
      if ran.dashboard and bar.on: bar.show(force=True)

      def taken():   # the plan's units in order: a stored one is its result, the others go to the workers
        for u in plan:
          if u.needs in ran.missing: continue
          ran.order.append(u)
          if u.key in stored:
            ran.results[u.key] = stored[u.key]; ran.resumed += 1
            if stop is not None and stop(ran.results): return
          else: yield u

      def done(unit, result):
        ran.results[unit.key] = result
        if book is not None: book.record(hunt, unit.key, stored_part(result), result.get("findings", []), result.get("worker", "?"))
        bar.unit_done(result.get("worker", "?"), result.get("examples", 0), len(result.get("findings", [])))
        if on_done is not None: on_done(unit, result)

      if window == "auto": window = 2 * max(1, c.threads())
      try: c.run(fn, taken(), done, snapshot, *args, progress=bar, stop=(lambda: stop(ran.results)) if stop else None, window=window)
      except ClusterLost as e: ran.lost = e
      finally: bar.close()
      if cleanup is not None and ran.lost is None:
        try: c.everywhere(cleanup)
        except Exception: pass   # a worker gone meanwhile: its children went with it
  finally:
    if book is not None: book.close()
  ran.order = [u for u in ran.order if u.key in ran.results]
  return ran


# ------------------------------------------------------------------ the command line's side
def add_options(p, local: str) -> None:
  """--scheduler, --db and --progress of a command whose searches run in units; `local`
  says what runs without a scheduler."""
  p.add_argument("--scheduler", metavar="ADDRESS", type=_address, default=None,
                 help=f"run the units on the Dask scheduler at ADDRESS (tcp://HOST:PORT; default $TINYSPEC_SCHEDULER, then "
                      f"[tool.tinyspec] scheduler; without one: {local})")
  p.add_argument("--db", metavar="PATH", type=Path, default=None,
                 help="the findings database (default OUT/findings.sqlite with --sanitize and --campaign; the graph fuzz keeps "
                      "one only when given): each distinct finding once with its repro and count; a run that stopped "
                      "continues there (`tinyspec findings PATH` lists them)")
  p.add_argument("--progress", action="store_true", help="a progress line on stderr even when it is not a terminal")


def _address(text: str) -> str:
  """--scheduler's value: a Dask scheduler's address."""
  try: return scheduler("--scheduler", text)
  except EnvironmentValue as e: raise argparse.ArgumentTypeError(e.msg) from None


def resolve(a, prog: str) -> tuple[str | None, Path]:
  """(the scheduler's address or None, the findings database) of the command line `a`
  (SettingsError, FileRefused for what cannot be used)."""
  address, where = scheduler_address(a.scheduler, load_settings())
  if address is not None and where != "--scheduler": print(f"{prog}: on the Dask scheduler at {address} (from {where})", file=sys.stderr)
  if a.db is not None: return address, a.db
  return address, make_dir(a.out) / "findings.sqlite"


def said(prog: str, rep, db: Path | None, total: int) -> int | None:
  """What a run's report says of the cluster, on stderr: the units taken from the database
  (None: the run has none), the tags no worker had, a scheduler that went away (the exit
  code then: EXIT_LOST)."""
  if rep.resumed:
    print(printable(f"{prog}: {rep.resumed}{f' of {total}' if total else ''} units were finished before: taken from {db} "
                    "(another --db or --out starts over)"), file=sys.stderr)
  for tag in rep.missing:
    print(printable(f"{prog}: no worker has {tag}: its units did not run (start a worker that has it: "
                    f"dask worker ADDRESS --resources \"{tag}=1\")"), file=sys.stderr)
  if rep.lost is not None:
    kept = (f"are kept in {db}: the same command continues from there" if db is not None else
            "are the ones above (with --db PATH they are kept, and the same command continues from there)")
    print(printable(f"{prog}: {rep.lost}; the findings of the units that finished {kept} [cluster.lost]"), file=sys.stderr)
    return EXIT_LOST
  return None


def interrupted(prog: str, e: BaseException, db: Path | None) -> int:
  """After SIGINT or SIGTERM: the children killed, what is kept said (db None: a graph fuzz
  without --db keeps nothing); exit 130 or 143."""
  kill_children()
  kept = (f"are kept in {db}: the same command continues from there" if db is not None else
          "are not kept (with --db PATH they are, and the same command continues from there)")
  print(printable(f"{prog}: interrupted by {'SIGTERM' if isinstance(e, Terminated) else 'SIGINT'}; the findings of the units that "
                  f"finished {kept}"), file=sys.stderr)
  return getattr(e, "exit_code", 130)
