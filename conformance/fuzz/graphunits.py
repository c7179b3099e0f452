"""The graph fuzz (`tinyspec fuzz --backend NAME --examples N`) in units on Dask distributed
(conformance/cluster.py): here for one job, on an embedded LocalCluster of --jobs
processes, or on the scheduler of --scheduler.

Its rounds (driver.py: one per focus, a first pass of one example each, then
EXPLORE_PER_ROUND each) are numbered from the run's --seed alone, so the examples
first..first+share-1 of a run are a unit: (backend, first example, share), drawn by
driver.hunt_unit with its own list of kinds found. The one thing a round took from the
rounds before it was that list (a kind found earlier is not shrunk again); a unit keeps
its own, and the merge in the units' order keeps the first unit's failure of each kind. So
the same --seed and --examples give the same examples, refusals and failures on one
process, N processes and a cluster; a kind that two units find is shrunk twice.

A unit needs the backend's tag (run/onworker.py: its name, NAME.DEVICE where the command's
environment chooses a device); a worker opens the backend once and keeps it between
units. What a unit writes (its cases, a triage's repro) travels home as files and is
written under --out here, for the failures the merge keeps.
"""
from __future__ import annotations
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
import json
from tinyspec.conformance.run.onworker import environment, kept, backend_tag, close_kept, probe_each
from tinyspec.conformance.cluster import Unit, worker_name
from tinyspec.conformance.findings import example_database, case_text
from tinyspec.conformance.fuzz.units import database_key, run_units
from tinyspec.conformance.fuzz.driver import FuzzReport, hunt_unit, hunter, merge, unit_shares
from tinyspec.conformance.fuzz.runners import Isolated
from tinyspec.dtypes import DTYPES


@dataclass(frozen=True)
class GraphJob:
  """How a unit's worker runs the fuzz: what the command line asked."""
  backend: str
  seed: int
  levels: tuple
  stages: bool
  max_ops: int
  timeout: float
  profile: str | None
  env: tuple             # run/onworker.forwarded()


def open_runner(job: GraphJob):
  """The job's backend behind the protocol, started here, with its Hunter (BackendUnavailable,
  KeyError, NoDrawableOps where it cannot be)."""
  runner = Isolated(job.backend, job.timeout, env=environment(job.env))
  try:
    runner.profile = job.profile or getattr(runner.caps, "profile", "strict")
    return hunter(job.backend, runner, job.levels, job.seed, job.stages, job.max_ops)
  except BaseException:
    runner.stop()
    raise


def kept_hunter(job: GraphJob):
  """This process's Hunter for the job, opened the first time (run/onworker.py kept)."""
  return kept(("graph-fuzz", job), partial(open_runner, job), lambda h: h.runner.stop())


def plan(examples: int, tag: str) -> list:
  """The run's units: (tag, first example, share), driver.unit_shares."""
  return [Unit("graph", tag, start, n, k, tag) for k, (start, n) in enumerate(unit_shares(examples))]


def run_unit(unit, examples: dict, job: GraphJob) -> dict:
  """One unit on a worker (driver.hunt_unit), with what the findings database keeps of it."""
  t0 = time.monotonic()
  h = kept_hunter(job)
  db = example_database(examples.get(database_key(unit), []))
  r = hunt_unit(h, unit.seed, unit.share, db, database_key(unit))
  r.update(worker=worker_name(), seconds=time.monotonic() - t0, saved=db.saved, name=h.runner.name, profile=h.runner.profile,
           findings=[_finding(f, d, h.runner.name) for d, (f, _) in zip(r["found"], r["live"]) if d["kind"] != "unsupported"])
  return r


def _finding(f, d: dict, backend: str) -> dict:
  """A failure as the findings database keeps it (its signature: property, op and dtype, on the backend)."""
  m = f.case()
  return {"signature": json.dumps(["graph", backend, *json.loads(d["signature"])]), "op": f.op,
          "dtype_class": DTYPES[f.dtype].cls if f.dtype in DTYPES else None, "device": backend,
          "kind": f.prop if d["kind"] == "failure" else f"documented: {getattr(f.triage, 'bug', '?')}", "text": str(f)[:3000],
          "repro": case_text(m.graph.dumps(), m.inputs)}


def fuzz_units(job: GraphJob, examples: int, out: Path | None, log=None, scheduler: str | None = None, jobs: int = 1,
               db: Path | None = None, progress: bool | None = None):
  """The graph fuzz of `job` in units (see the module doc): a driver.FuzzReport merged in the
  units' order, with `lost`, `missing`, `resumed` and `dashboard` as run_units says them.
  Without a scheduler the backend is opened here first (BackendUnavailable, NoDrawableOps
  said before any cluster starts)."""
  t0 = time.monotonic()
  tag = backend_tag(job.backend, job.env)
  try:
    first = kept_hunter(job) if scheduler is None else None
    units = plan(examples, tag)
    hunt = (f"graph fuzz backend={job.backend} examples={examples} seed={job.seed} levels={','.join(job.levels)} "
            f"stages={job.stages} max_ops={job.max_ops} profile={job.profile} env={sorted(k for k in job.env if k[1] is not None)}")
    ran = run_units(units, run_unit, (job,), hunt, db, scheduler, jobs, probe=partial(probe_each, {tag: job}, kept_hunter),
                    progress=progress, label="fuzz", cleanup=close_kept)
  finally:
    close_kept()
  done = [ran.results[u.key] for u in units if u.key in ran.results]
  name = next((r["name"] for r in done), first.runner.name if first else job.backend)
  rep = merge(done, name, next((r["profile"] for r in done), first.runner.profile if first else "?"), out, log) if done else FuzzReport(name)
  rep.lost, rep.missing, rep.resumed, rep.dashboard = ran.lost, ran.missing, ran.resumed, ran.dashboard
  rep.seconds = time.monotonic() - t0
  return rep
