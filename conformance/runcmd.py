"""`tinyspec conformance` once its command line is read (conformance/cli.py): executing
backends run the case corpus in shards (conformance/run/shards.py) here, on an embedded
LocalCluster of --workers processes, or on the Dask scheduler of --scheduler
(TINYSPEC_SCHEDULER, [tool.tinyspec] scheduler); the results are printed and reported in
the cases' order. Without a scheduler each backend is opened here first, so one that
cannot run is said once, before the corpus is read; with one, the workers open it.
"""
from __future__ import annotations
import json
import sys
from pathlib import Path
import shlex
from tinyspec.diagnostics import EXIT_OK, EXIT_INVALID, EXIT_UNREADABLE
from tinyspec.deadline import sigterm_raises, Terminated, kill_children
from tinyspec.files import FileRefused, printable, write_file
from tinyspec.conformance.run.runner import EXIT_NOTHING_RAN
from tinyspec.conformance.run.selection import describe, SelectionError
from tinyspec.conformance.cluster import scheduler_address, ClusterUnreachable, EXIT_LOST
from tinyspec.conformance.run.onworker import close_kept, backend_tag, forwarded
from tinyspec.conformance.run.shards import Job, kept_runner, Gathering
from tinyspec.conformance.run.execute import BackendUnavailable, coverage
from tinyspec.conformance.corpus.manifest import ManifestError
from tinyspec.conformance.run import runner
from tinyspec.conformance.corpus.cases import load_cases, CaseError, CASES_DIR
from tinyspec.conformance.run.report import Progress, merge_coverage, junit_xml


def err(msg: str, code: int = EXIT_UNREADABLE) -> int:
  print(printable(f"tinyspec conformance: {msg}"), file=sys.stderr)
  return code


def none_selected(a) -> int:
  said = describe(a.patterns, a.case_ids)
  return err("no case matches" + (f" {said}" if said else " (the corpus is empty)"), EXIT_NOTHING_RAN)


class _Refused(Exception):
  """A backend that cannot run (unknown, unavailable, or a manifest it cannot use)."""


def run_execs(a, names, show) -> int:
  if a.workers < 1: return err("--workers must be at least 1")
  if not a.timeout > 0: return err("--timeout must be a positive number of seconds")
  address, where = scheduler_address(a.scheduler, a.settings)
  if address is not None and where != "--scheduler": print(f"tinyspec conformance: on the Dask scheduler at {address} (from {where})", file=sys.stderr)
  try: jobs = _jobs(a, names)
  except _Refused as e: return err(str(e))
  opened: dict = {}
  try:
    # a backend that cannot run here is said once, before the corpus is read (--list: said, and
    # the cases listed without what it would do with them); on a scheduler the workers open it
    for tag, job in jobs.items():
      if address is not None and not a.list: continue
      try: opened[tag] = _open(job)
      except _Refused as e:
        if a.list:
          print(printable(f"tinyspec conformance: {e} (listing the cases without its manifest and capabilities)"), file=sys.stderr); continue
        return err(str(e))
    return _select_and_run(a, jobs, show, opened, address)
  finally:
    close_kept()


def _jobs(a, names) -> dict:
  """tag -> shards.Job for each backend of the command line (_Refused for an unknown one)."""
  fwd = forwarded()
  out = {}
  for name in names:
    try: tag = backend_tag(name, fwd)
    except KeyError as e: raise _Refused(str(e).strip('"')) from None
    out[tag] = Job(name, str(a.project) if getattr(a, "project", None) else None, str(a.cases) if a.cases is not None else None,
                   a.timeout, a.batch, a.verify, a.profile, str(a.manifest) if a.manifest is not None else None,
                   tuple(sorted((k, str(v)) for k, v in (a.settings.manifests or {}).items())), a.divergence, fwd)
  return out


def _open(job):
  """The job's runner, opened in this process (and kept: the units run here reuse it)."""
  try: return kept_runner(job)
  except (KeyError, ManifestError, BackendUnavailable) as e: raise _Refused(str(e).strip('"')) from None


def _select_and_run(a, jobs, show, opened, address) -> int:
  broken: list = []
  try:
    every = load_cases(a.cases, broken)
    cases = runner.select(every + [_Named(cid) for cid, _ in broken], a.patterns, a.case_ids)
  except (CaseError, SelectionError) as e: return err(str(e))
  chosen = {c.id for c in cases}
  broken = [(cid, msg) for cid, msg in broken if cid in chosen]
  cases = [c for c in cases if not isinstance(c, _Named)]
  if not cases and not broken: return none_selected(a)
  if a.list:
    for c in cases: print(printable(c.id + _listed(c, opened.values())))
    return EXIT_OK
  # a malformed case folder is that case's error; the others run
  names = [j.backend for j in jobs.values()]
  results = [runner.Result(cid, name, "error", msg) for cid, msg in broken for name in names]
  for r in results: show(a, r)
  with sigterm_raises():
    try:
      return _run_shards(a, jobs, cases, show, results, address, [c.id for c in every])
    except (KeyboardInterrupt, Terminated) as e:
      return _interrupted(a, e, results, names, cases)


def _listed(case, runners) -> str:
  """What --list says after a case's id: what each backend would do with it other than run
  it (excluded or expected to fail by its manifest, unsupported); '' when it just runs."""
  said = []
  for r in runners:
    out, why = r.manifest.excluded(case.id), r.manifest.reason(case.id)
    if out: said.append(f"{r.name}: excluded by its manifest: {out}")
    elif r.unsupported(case): said.append(f"{r.name}: unsupported, {r.unsupported(case)}")
    elif why: said.append(f"{r.name}: expected to fail: {why}")
  return "".join(f"  ({s})" for s in said)


class _Named:
  def __init__(self, cid): self.id = cid


def _interrupted(a, e, results, names, cases) -> int:
  """After SIGINT or SIGTERM: the backends are dead (their process groups killed); say what
  ran, write the reports of it, exit 130 or 143."""
  kill_children()
  code = getattr(e, "exit_code", 130)
  sys.stdout.flush()
  print(f"\ninterrupted by {'SIGTERM' if code == 143 else 'SIGINT'}: {len(results)} of {len(cases) * len(names)} results", file=sys.stderr)
  finish(a, results, names, str(a.cases or "conformance/cases"), cases)
  return code


def _run_shards(a, jobs, cases, show, results, address, every_id) -> int:
  """The shards of every backend; each backend's profile line (and coverage, and its
  manifest's stale entries) once its last shard is home."""
  bars: dict = {}
  unwritten: list = []

  def emit(job, about, out):
    bar = bars.setdefault(job, Progress(len(cases), about["name"], True if a.progress else None))
    for r in out:
      bar.update(r)
      if r.status in ("fail", "error", "xpass") or a.verbose:
        if bar.on and bar.tty: sys.stderr.write("\r\033[K"); sys.stderr.flush()
        show(a, r)
    results.extend(out)

  def done(job, about, res):
    if job in bars: bars[job].close()
    print(printable(f"{about['name']}: {runner.profile_line(res)} (judged by {about['profile']})"))
    if a.coverage:
      try: merge_coverage(a.coverage, about["name"], coverage(cases, res))
      except FileRefused as e: unwritten.append(e)
    stale = about["manifest"].unused(every_id)
    if stale: print(printable(f"note: {about['name']}'s manifest has entries matching no case: {', '.join(stale)}"), file=sys.stderr)

  g = Gathering(jobs, cases, Path(a.cases) if a.cases is not None else CASES_DIR, emit, done)
  try: ran = g.run(address, a.workers)
  except ClusterUnreachable as e: return err(f"{e} [{e.rule}]")
  except (KeyError, ManifestError, BackendUnavailable) as e:   # a worker named as having the backend (--resources) cannot open it
    return err(str(e).strip('"'))
  names = [j.backend for j in jobs.values()]
  code = finish(a, results, names, str(a.cases or "conformance/cases"), cases)
  if unwritten: return err(f"{unwritten[0]}")
  return _cluster_said(ran, g, jobs) or code


def _cluster_said(ran, g, jobs) -> int | None:
  """What did not run, on stderr: the backends no worker has, workers whose backends differ,
  a scheduler that went away (their exit codes; None when everything ran)."""
  code = None
  for tag in ran.missing:
    err(f"no worker has {tag}: the cases of backend {jobs[tag].backend} did not run (where the backend runs, start a worker: "
        f"dask worker ADDRESS --resources \"{tag}=1\")")
    code = EXIT_UNREADABLE
  for tag, labels in g.mixed.items():
    err(f"the workers' backends {jobs[tag].backend} are not the same ({', '.join(sorted(labels))}): their results are not one "
        f"backend's; choose its device where the command runs (the backend's device variable) [cluster.mixed]")
    code = EXIT_UNREADABLE
  if ran.lost is not None:
    err(f"{ran.lost}; the results above are those of the shards that finished [cluster.lost]")
    code = EXIT_LOST
  return code


def finish(a, results, names, cases_dir, cases=()) -> int:
  c = runner.counts(results)
  a.terminal.corpus = cases_dir if a.cases is not None else None   # (the shipped one goes without saying)
  for line in a.terminal.closing(_rerun(a, names)): print(line)
  print(runner.summary_line(c))
  try:
    if a.json: write_file(a.json, json.dumps(runner.report_json(results, names, cases_dir, getattr(a, "profile", None)), indent=1) + "\n")
    if a.junit: write_file(a.junit, junit_xml(results, "tinyspec conformance"))
    if getattr(a, "html", None):
      from tinyspec.conformance.run import htmlreport  # noqa: PLC0415 (start-up time: only --html draws, with tinyspec.show)
      print(f"wrote {htmlreport.write(a.html, results, {c.id: c for c in cases})}")
  except FileRefused as e:
    return err(f"{e}")
  if not runner.ok(c): return EXIT_INVALID
  if runner.nothing_ran(c):
    return err(f"no case ran: {runner.summary_line(c)} (every case selected was unsupported or excluded)", runner.EXIT_NOTHING_RAN)
  return EXIT_OK


def _rerun(a, names) -> str:
  """The start of the command that runs the failing cases again."""
  args = ["tinyspec", "conformance"] + ([] if getattr(a, "project", None) else [x for n in names for x in ("--backend", n)])
  if a.cases is not None: args += ["--cases", str(a.cases)]
  if getattr(a, "profile", None): args += ["--profile", a.profile]
  if not getattr(a, "verify", True): args.append("--no-verify")
  return shlex.join(args)
