"""Running a search's units (conformance/cluster.py) with its findings database
(conformance/findings.py): what `tinyspec fuzz --sanitize` and the tinygrad campaign share.

    ran = run_units(plan, fn, args, hunt="sanitize seed=0 ...", db=path, scheduler=None, jobs=2)
    ran.results     # unit key -> result (this run's, and the stored ones of a resumed run)
    ran.lost        # ClusterLost when the scheduler went away (ran.results: what finished before)
    ran.missing     # resource tags no worker has (their units did not run), each said once

fn(unit, examples, *args) runs on a worker; `examples` is the snapshot of Hypothesis's
entries for the unit's family or device (findings.Findings.examples, other hunts' only).
Its result is a dict with at least `examples` (checked), `worker`, `saved` (Hypothesis
entries it saved) and `findings` (the JSON of each distinct finding, findings.record's
form): `stored(result)` is what the database keeps of it (JSON only).
"""
from __future__ import annotations
import sys
from dataclasses import dataclass, field
from pathlib import Path
from tinyspec.conformance.cluster import Cluster, ClusterLost, Progress


@dataclass
class Ran:
  results: dict = field(default_factory=dict)
  lost: ClusterLost | None = None
  missing: list = field(default_factory=list)
  resumed: int = 0                     # units whose stored result was taken (not run again)
  dashboard: str | None = None


def database_key(unit) -> bytes:
  """The Hypothesis key of a unit's searches: its kind and family or device (not its seed:
  a failing example replays in every later search of that family)."""
  return f"tinyspec/{unit.kind}/{unit.name}".encode()


def stored(result: dict) -> dict:
  """What the database keeps of a result: its JSON parts (a live Failure stays here)."""
  return {k: v for k, v in result.items() if k != "live"}


def run_units(plan, fn, args: tuple, hunt: str, db: Path | None = None, scheduler: str | None = None, jobs: int = 1,
              probe=None, log=None, progress: bool | None = None, stop=None, label: str = "fuzz",
              resources: dict | None = None, cleanup=None) -> Ran:
  """Every unit of `plan` not finished before (in the database, for this hunt) through
  fn on the cluster; each result recorded in the database as it arrives. cleanup(): run
  on every worker at the end (what fn kept between units, such as child processes)."""
  from tinyspec.conformance.findings import Findings
  ran = Ran()
  book = Findings(db) if db is not None else None
  try:
    if book is not None:
      done = book.done_units(hunt)
      for u in plan:
        if u.key in done: ran.results[u.key] = done[u.key]
      ran.resumed = len(ran.results)
    todo = [u for u in plan if u.key not in ran.results]
    if not todo: return ran
    snapshot = {u.name: book.examples(database_key(u), hunt) if book is not None else [] for u in todo}
    with Cluster(scheduler, jobs, resources) as c:
      if probe is not None: c.declare(probe, label)
      ran.missing = c.missing({u.needs for u in todo})
      todo = [u for u in todo if u.needs not in ran.missing]
      ran.dashboard = c.dashboard
      bar = Progress(len(todo), label, ran.dashboard, progress)
      if ran.dashboard and bar.on: bar.show(force=True)

      def done(unit, result):
        ran.results[unit.key] = result
        if book is not None: book.record(hunt, unit.key, stored(result), result.get("findings", []), result.get("worker", "?"))
        bar.unit_done(result.get("worker", "?"), result.get("examples", 0), len(result.get("findings", [])))

      try: c.run(fn, todo, done, {k: v for k, v in snapshot.items()}, *args, progress=bar,
                 stop=(lambda: stop(ran.results)) if stop else None)
      except ClusterLost as e: ran.lost = e
      finally: bar.close()
      if cleanup is not None and ran.lost is None:
        try: c.client.run(cleanup)
        except Exception: pass   # a worker gone meanwhile: its children went with it
  finally:
    if book is not None: book.close()
  return ran


# ------------------------------------------------------------------ the command line's side
def add_options(p, local: str) -> None:
  """--scheduler, --db and --progress of a command whose searches run in units; `local`
  says what runs without a scheduler."""
  from tinyspec.environment import scheduler
  p.add_argument("--scheduler", metavar="ADDRESS", type=lambda v: scheduler("--scheduler", v), default=None,
                 help=f"run the units on the Dask scheduler at ADDRESS (tcp://HOST:PORT; default $TINYSPEC_SCHEDULER, then "
                      f"[tool.tinyspec] scheduler; without one: {local}); docs/cluster.md")
  p.add_argument("--db", metavar="PATH", type=Path, default=None,
                 help="the findings database (default OUT/findings.sqlite): each distinct finding once with its repro and "
                      "count; a run that stopped continues there (`tinyspec findings PATH` lists them)")
  p.add_argument("--progress", action="store_true", help="a progress line on stderr even when it is not a terminal")


def resolve(a, prog: str) -> tuple[str | None, Path]:
  """(the scheduler's address or None, the findings database) of the command line `a`
  (SettingsError, FileRefused for what cannot be used)."""
  from tinyspec.conformance.cluster import scheduler_address
  from tinyspec.conformance.run.settings import load_settings
  from tinyspec.files import make_dir
  address, where = scheduler_address(a.scheduler, load_settings())
  if address is not None and where != "--scheduler": print(f"{prog}: on the Dask scheduler at {address} (from {where})", file=sys.stderr)
  if a.db is not None: return address, a.db
  return address, make_dir(a.out) / "findings.sqlite"


def said(prog: str, rep, db: Path, total: int) -> int | None:
  """What a run's report says of the cluster, on stderr: the units taken from the database,
  the tags no worker had, a scheduler that went away (the exit code then: EXIT_LOST)."""
  from tinyspec.files import printable
  from tinyspec.conformance.cluster import EXIT_LOST
  if rep.resumed:
    print(printable(f"{prog}: {rep.resumed} of {total} units were finished before: taken from {db} (another --db or --out starts over)"),
          file=sys.stderr)
  for tag in rep.missing:
    print(printable(f"{prog}: no worker has {tag}: its units did not run (start a worker that has it: "
                    f"dask worker ADDRESS --resources \"{tag}=1\"; docs/cluster.md)"), file=sys.stderr)
  if rep.lost is not None:
    print(printable(f"{prog}: {rep.lost}; the findings of the units that finished are kept in {db}: the same command "
                    f"continues from there [cluster.lost]"), file=sys.stderr)
    return EXIT_LOST
  return None
