"""`tinyspec conformance --backend` in units (conformance/cluster.py): the selected cases cut
into shards that run on Dask workers, here, on an embedded LocalCluster of --workers
processes, or on the scheduler of --scheduler; one code path for all three.

    g = Gathering(backends, cases, root, emit, done)   # backends: tag -> Job (onworker.backend_tag)
    g.run(address, workers)       # emit(job, about, results) per shard in the plan's order; done(job, about, all its results) per backend

A shard is (backend, first case, cases): CASES_PER_UNIT consecutive cases of the selection
at most, in the selection's order, the same whatever the number of workers. On its worker
a shard's cases run through that worker process's CaseRunner for the backend (opened once,
kept between shards: onworker.kept), which searches the first divergent node of the first
`divergence` failing cases of the shard; the gathering keeps that of the first `divergence`
failing cases of the whole run (in the cases' order) and explains each failure here,
where the corpus was read. So the results, their order and the reports are the same on
one process, N processes and a cluster (only the timings differ). The price: a run whose
every case fails searches up to `divergence` cases per shard, not per run.

A worker has a backend's tag (onworker.backend_tag) when its --resources say so or when
the backend opens there (the probe); a shard needs it. Workers read the cases from the
same corpus folder (the shipped one: their own install's; --cases DIR: that path there).
"""
from __future__ import annotations
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from tinyspec.conformance.run.execute import CaseRunner, explained
from tinyspec.conformance.run.onworker import environment, kept, close_kept, probe_each
from tinyspec.conformance.cluster import Unit, split, worker_name
from tinyspec.conformance.corpus.cases import CASES_DIR, CaseError, load_case
from tinyspec.conformance.run.runner import Result
from tinyspec.conformance.fuzz.units import run_units

CASES_PER_UNIT = 64   # cases per shard at most: ~17 shards of the shipped corpus, each a batch or two of a compiler
DIVERGENCE_LINE = "\n  first divergent node:"


@dataclass(frozen=True)
class Job:
  """How a shard's worker runs its cases: what the command line asked for one backend."""
  backend: str                  # the backend as given (name, cmd:..., a path)
  project: str | None           # the folder of the pyproject.toml that named it (its paths are relative to it)
  root: str | None              # the corpus folder (None: the shipped corpus)
  timeout: float
  batch: int | None
  verify: bool
  profile: str | None
  manifest: str | None          # --manifest as given
  manifests: tuple              # [tool.tinyspec.manifests]: ((backend, path), ...)
  divergence: int
  env: tuple                    # onworker.forwarded()

  @property
  def backend_arg(self) -> str | None:
    """What a repro command names (None: the project's backend, which `tinyspec run` reads too)."""
    return None if self.project is not None else self.backend


def open_runner(job: Job):
  """The job's CaseRunner started here (capabilities read, manifest chosen): BackendUnavailable,
  KeyError or ManifestError where it cannot be."""
  r = CaseRunner(job.backend, timeout=job.timeout, batch=job.batch, verify=job.verify, profile=job.profile,
                 divergence=job.divergence, project=Path(job.project) if job.project else None, env=environment(job.env))
  try:
    r.capabilities()
    r.use_manifest(Path(job.manifest) if job.manifest else None, {k: Path(v) for k, v in job.manifests})
  except BaseException:
    r.close()
    raise
  return r


def kept_runner(job: Job):
  """This process's runner for the job, opened the first time (onworker.kept)."""
  return kept(("conformance", job), partial(open_runner, job), CaseRunner.close)


def plan(tags, n_cases: int) -> list:
  """The shards of every backend (tags in the command line's order), backend after backend."""
  units = []
  for tag in tags:
    start = 0
    for n in split(n_cases, CASES_PER_UNIT):
      units.append(Unit("conformance", tag, start, n, len(units), tag))
      start += n
  return units


def run_shard(unit, _examples: dict, jobs: dict, cases: tuple) -> dict:
  """One shard on a worker: its cases (cases: ((id, folder relative to the corpus), ...) of
  the whole selection) through the worker's runner, unexplained, in order."""
  job = jobs[unit.name]
  r = kept_runner(job)
  root = Path(job.root) if job.root else CASES_DIR
  mine = cases[unit.seed:unit.seed + unit.share]
  loaded, unread = [], {}
  for cid, folder in mine:
    try: loaded.append(load_case(root, folder))
    except CaseError as e: unread[cid] = Result(cid, r.name, "error", f"{e}")   # (the worker's copy of the corpus)
  ran = {x.case: x for x in r.run(loaded, explain=False, keep=True)}
  results = [ran.get(cid) or unread[cid] for cid, _ in mine if cid in ran or cid in unread]
  return {"examples": len(mine), "results": [x.to_json() for x in results], "worker": worker_name(), "findings": [],
          "about": {"name": r.name, "profile": r.profile, "label": r.manifest_name, "manifest": r.manifest}}


class Gathering:
  """The shards' results brought home in the plan's order: each result's divergence kept
  for the first `divergence` failing cases of its backend, its message explained, then
  emit(job, about, results) per shard and done(job, about, results) after a backend's last
  shard (about: what the backend said of itself: name, profile, label, manifest). `mixed`:
  tag -> the different labels (name-device) the workers' backends said, where they differ."""

  def __init__(self, backends: dict, cases: list, root: Path, emit, done):
    self.backends, self.cases, self.root, self.emit, self.done = backends, cases, Path(root), emit, done
    self.by_id = {c.id: c for c in cases}
    self.units = plan(list(backends), len(cases))
    self.about: dict = {}        # tag -> what the backend said of itself (its name, profile, manifest)
    self.results: dict = {}      # tag -> its results so far, in order
    self._failing: dict = {}     # tag -> failing positive cases seen so far
    self._home: dict = {}        # unit index -> result, waiting for the units before it
    self._next = 0
    self.mixed: dict = {}
    self.ran = None

  def run(self, address: str | None, workers: int, progress=None):
    """Every shard (Ran of conformance/fuzz/units.py: .lost, .missing say what did not run)."""
    cases = tuple((c.id, _folder(c, self.root)) for c in self.cases)
    self.ran = run_units(self.units, run_shard, (self.backends, cases), "conformance", None, address, workers,
                         probe=partial(probe_each, self.backends, kept_runner), progress=False, label="conformance",
                         cleanup=close_kept, on_done=self._arrived)
    self._flush(everything=True)
    return self.ran

  def _arrived(self, unit, result: dict) -> None:
    self._home[unit.index] = result
    self._flush()

  def _flush(self, everything: bool = False) -> None:
    """Emit the results that are home in the plan's order (everything: past the units that
    never came: a backend no worker has, a lost scheduler)."""
    while self._next < len(self.units):
      u = self.units[self._next]
      if u.index in self._home: self._emit(u, self._home.pop(u.index))
      elif not everything: return
      self._next += 1
      last = self._next == len(self.units) or self.units[self._next].name != u.name
      if last and u.name in self.about: self.done(self.backends[u.name], self.about[u.name], self.results[u.name])

  def _emit(self, unit, result: dict) -> None:
    job, about = self.backends[unit.name], self.about.setdefault(unit.name, result["about"])
    if result["about"]["label"] != about["label"]: self.mixed.setdefault(unit.name, {about["label"]}).add(result["about"]["label"])
    out = []
    for d in result["results"]:
      r, case = Result(**d), self.by_id.get(d["case"])
      if r.status == "fail" and case is not None and case.kind == "positive":
        self._failing[unit.name] = n = self._failing.get(unit.name, 0) + 1
        if n > job.divergence: r.message, r.divergence = r.message.split(DIVERGENCE_LINE)[0], {}
      out.append(explained(r, case, job.backend_arg, about["profile"], job.profile is not None, job.verify))
    self.results.setdefault(unit.name, []).extend(out)
    self.emit(job, about, out)


def _folder(case, root: Path) -> str:
  """A case's folder relative to the corpus it was read from."""
  try: return Path(case.dir).relative_to(root).as_posix()
  except ValueError: return Path(case.dir).resolve().relative_to(root.resolve()).as_posix()
