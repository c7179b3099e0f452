"""Running cases through an executing backend in a process of its own.

  r = CaseRunner("c")                     # a registered name, or an external command
  results = r.run(cases)                  # one runner.Result per case, in the cases' order

Every backend runs behind the protocol of conformance/run/protocol.py: a registered Python
backend in `python -m tinyspec.conformance.run.worker`, any other program directly. A crash, an abort
or a hang (past `timeout` seconds) fails the case being run, and the backend process is
started again for the next one. One runner drives one backend process; cases run side by
side as shards on Dask workers, each worker with a runner of its own (conformance/run/shards.py).
Cases whose ops, dtypes or devices the backend does not declare in its capabilities are `unsupported` (not run). The backend's manifest
(conformance/corpus/manifest.py) turns failures into expected failures and passes of listed
cases into unexpected passes. Tensor-level cases may be merged into one graph per run
(conformance/run/batch.py) for backends that say so (`batch`); a case that does not pass in
a batch is run again on its own, and that run decides.
"""
from __future__ import annotations
import os
import queue
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
import numpy as np
from tinyspec.conformance.run.runner import Result
from tinyspec.conformance.run.protocol import (BackendProcess, BackendDied, BadAnswer, RequestTooLong, read_outputs, worker_command,
                                              split_command)
from tinyspec.files import FileRefused, check_name
from tinyspec.conformance.corpus.cases import from_disk, load_array, storage_dtype
from tinyspec.conformance.run.compare import describe
from tinyspec.conformance.corpus.manifest import Manifest
from tinyspec.tolerance import PROFILES
from tinyspec.backends import backend_names, Capabilities, get_backend
from tinyspec.conformance.run.selection import did_you_mean
from tinyspec.files import NAME_RE
from tinyspec.conformance.run.failures import explain, relative_to_corpus
from tinyspec.conformance.corpus.manifest import find_manifest
from tinyspec.conformance.corpus.cases import verify
from tinyspec.conformance.run.batch import batchable, merge, write
from tinyspec.conformance.run.divergence import first_divergent


class BackendUnavailable(Exception):
  pass


@dataclass
class BackendSpec:
  label: str            # the name results and the manifest use
  command: list         # how to start it
  python: bool          # a registered Python backend (served by conformance/run/worker.py)
  home: Path | None = None   # where its program lives: a manifest it names is relative to it
  cwd: Path | None = None    # the folder it runs in (None: the current one)


def resolve_backend(spec: str, cwd: Path | None = None) -> BackendSpec:
  """A registered backend name, `cmd:COMMAND LINE`, or the path of an executable. With
  `cwd` (the folder of the pyproject.toml that names it), relative paths in it are
  relative to cwd, and the backend runs there."""
  base = Path(cwd) if cwd is not None else Path.cwd()
  if spec.startswith("cmd:"):
    try: cmd = split_command(spec[4:])
    except ValueError as e: raise KeyError(f"cmd: cannot split the command line ({e})") from None
    if not cmd: raise KeyError("cmd: needs a command line")
    if cwd is not None and ("/" in cmd[0] or os.sep in cmd[0]): cmd[0] = str(base / cmd[0])   # ./backend, bin/x
    return BackendSpec(_label(Path(cmd[-1]).stem if len(cmd) > 1 else Path(cmd[0]).stem), cmd, False, _home(cmd, base), cwd)
  p = base / spec
  try: executable = ("/" in spec or os.sep in spec) and p.is_file() and os.access(p, os.X_OK)
  except OSError: executable = False     # a name the file system cannot hold is no program
  if executable: return BackendSpec(_label(p.stem), [str(p.resolve())], False, p.resolve().parent, cwd)
  if spec not in backend_names():
    raise KeyError(f"unknown backend {spec!r}{did_you_mean(spec, backend_names())} (registered: {', '.join(backend_names())}; "
                   "or cmd:COMMAND, or the path of an executable)")
  return BackendSpec(spec, worker_command(spec), True)


def _home(cmd: list, base: Path) -> Path:
  """The folder of an external backend's program: the first argument naming a file (the
  script an interpreter runs: `node backend.js`; relative to base), else the program
  itself (a path, or found on PATH), else base."""
  for a in cmd[1:]:
    try:
      if not a.startswith("-") and (base / a).is_file(): return (base / a).resolve().parent
    except OSError: continue   # an argument the file system cannot hold is no file
  found = shutil.which(cmd[0])
  return Path(found).resolve().parent if found else base


def _label(stem: str) -> str:
  """An external backend's provisional name (until its hello names it): its program's
  file name when that is a plain name, else `external`."""
  return stem if NAME_RE.match(stem) else "external"


# ------------------------------------------------------------------ judging one answer
def judge_positive(case, outputs: dict, decomposed: bool, profile: str = "strict") -> str | None:
  """None when the backend's outputs (arrays as read from the protocol's .npy files)
  match the case's expected outputs in the profile (strict: the canonical results;
  portable: any allowed one, tinyspec.portable), else what is wrong."""
  for name, o in case.outputs.items():
    if name not in outputs: return f"{name}: missing (got {', '.join(sorted(outputs)) or 'no outputs'})"
    got = np.asarray(outputs[name])
    if got.dtype != storage_dtype(o.dtype): return f"{name}: dtype {got.dtype}, expected {o.dtype}"
    msg = describe(from_disk(got, o.dtype), load_array(o.file, o.dtype), o.dtype, o.bounds(decomposed, profile),
                   alternatives=o.alternatives(profile))
    if msg: return f"{name}: {msg}"
  return None


def judge_profiles(case, outputs: dict, decomposed: bool) -> dict:
  """profile -> None (met) or what is wrong, for both profiles (portable only where strict fails)."""
  strict = judge_positive(case, outputs, decomposed, "strict")
  return {"strict": strict, "portable": None if strict is None else judge_positive(case, outputs, decomposed, "portable")}


def judge_negative(case, answer: dict) -> str | None:
  want = case.expect.get("rule")
  if answer.get("ok"): return f"accepted an invalid graph (it breaks {want})"
  got = answer.get("rule")
  if got and want and got != want and case.expect.get("only", True):
    return f"refused with rule {got}, expected {want}"
  return None


def explained(r: Result, case, backend_arg: str | None, profile: str, explicit_profile: bool, verify: bool) -> Result:
  """A failing positive case's message, made to stand alone (conformance/run/failures.py);
  every message's paths into the corpus relative to it. backend_arg: what a repro command
  names (None: the project's backend)."""
  if case is None: return r
  r.message = relative_to_corpus(r.message, case)
  if r.status in ("fail", "error", "xpass") and case.kind == "positive":
    r.message = explain(case, r.message, backend_arg, profile, explicit_profile, verify)
  return r


# ------------------------------------------------------------------ the runner
class CaseRunner:
  def __init__(self, backend: str, timeout: float = 60.0, batch: int | None = None, manifest: Manifest | None = None,
               env: dict | None = None, verify: bool = True, profile: str | None = None, divergence: int = 20,
               project: Path | None = None):
    # project: the folder of the pyproject.toml whose [tool.tinyspec] names the backend: its
    # relative paths are from there, it runs there, and a repro command leaves --backend to it
    self.spec = resolve_backend(backend, project)
    self.divergence = int(divergence)   # failing cases of a run() whose first divergent node is searched (conformance/run/divergence.py)
    self._divergence_left = self.divergence   # and of the run_one() calls together
    self.backend_arg = None if project is not None else backend   # what a repro command names (None: the project's)
    self._cases: dict = {}        # case id -> case, for the repro line of a failure
    self.verify = verify          # check each case's sha256 pin before trusting it (rule case.pin)
    self.stopping = False         # set when the run is interrupted: results after it are dropped
    self.results: dict = {}       # case id -> Result so far (what an interrupted run reports)
    self.profile = profile        # None: the one the backend claims (capabilities)
    self.timeout = float(timeout)
    self.batch = batch
    self.manifest = manifest or Manifest()
    self.env = env
    self.caps = None
    self.own_manifest = None      # the manifest the backend names in its hello
    self.explicit_profile = profile is not None
    self.name = self.spec.label
    self._lock = threading.Lock()
    self._procs: list[BackendProcess] = []

  def _new_process(self) -> BackendProcess:
    env = dict(os.environ if self.env is None else self.env)
    return BackendProcess(self.spec.command, env=env, cwd=str(self.spec.cwd) if self.spec.cwd else None)

  def capabilities(self):
    """Start one backend process and read its capabilities (BackendUnavailable if it
    does not start or refuses hello)."""
    if self.caps is not None: return self.caps
    p = self._new_process()
    try: hello = p.start(timeout=max(self.timeout, 120.0))
    except BackendDied as e:
      p.stop()
      if e.kind == "protocol": raise BackendUnavailable(f"backend {self.name} broke the protocol in its hello: {e}") from None
      raise BackendUnavailable(f"backend {self.name} is not available: {e}") from None
    try:
      self.caps = Capabilities.from_json(hello.get("capabilities") or {})
      if not self.spec.python and hello.get("name"):
        # an external backend names itself (its results and manifest go by it): a name, not a path
        try: self.name = check_name(hello["name"], "backend's name")
        except FileRefused as e: raise ValueError(e.message) from None
      self.own_manifest = self._own_manifest(hello.get("manifest"))
      unknown = self.caps.unknown_names()
      if unknown: raise ValueError("its capabilities name what the tables do not have: " + ", ".join(unknown))
    except ValueError as e:
      p.stop()
      raise BackendUnavailable(f"backend {self.name} broke the protocol in its hello: {e} [backend.protocol]") from None
    self.decomposed = self.caps.decomposed
    self.profile = self.profile or self.caps.profile
    self.manifest_name = f"{self.name}-{self.caps.label}" if self.caps.label else self.name
    if self.spec.python:
      b = get_backend(self.spec.label)
      self.batch = self.batch if self.batch is not None else getattr(b, "batch", 1)
    self._procs.append(p)
    return self.caps

  def _own_manifest(self, named) -> Path | None:
    """The manifest the backend names in its hello (`manifest`: a path, relative to where
    its program lives), or None."""
    if named is None: return None
    if not isinstance(named, str) or not named or "\0" in named: raise ValueError("'manifest' must be the path of a file")
    p = Path(named)
    return p if p.is_absolute() else (self.spec.home or Path.cwd()) / p

  def use_manifest(self, explicit=None, project: dict | None = None) -> Manifest:
    """Choose the manifest (conformance/corpus/manifest.py find_manifest; after capabilities()):
    `explicit` (--manifest), the project's [tool.tinyspec.manifests] entry, the backend's own."""
    project = project or {}
    mine = project.get(self.manifest_name, project.get(self.name))
    self.manifest = find_manifest(self.manifest_name, explicit, {self.manifest_name: mine} if mine else None, self.own_manifest)
    return self.manifest

  def unsupported(self, case) -> str | None:
    if case.kind == "negative": return None if self.caps.validates else "the backend does not validate its input"
    if case.kind != "positive": return None
    miss = self.caps.missing(case.uses, case.dtypes, case.devices)
    return ("needs " + ", ".join(miss[:4]) + (" ..." if len(miss) > 4 else "")) if miss else None

  # -- running
  def run_one(self, case, keep: dict | None = None) -> Result:
    """One case on the first worker process (kept running between calls), judged alone
    (no batching), its failure's message as the runner's (operands, profile, repro) but
    not turned into xfail by the manifest: what the pytest plugin (which marks expected
    failures itself) and `tinyspec run --case` call. `keep` (a dict) gets the outputs
    the backend gave."""
    self.capabilities()
    self._cases[case.id] = case
    why = self.unsupported(case)
    if why: return Result(case.id, self.name, "unsupported", why)
    bad = self._pin(case)
    if bad: return Result(case.id, self.name, "error", bad)
    if not hasattr(self, "_tmp"): self._tmp = Path(tempfile.mkdtemp(prefix="tinyspec-conformance-"))
    d = _scratch(self._tmp / "one")
    try:
      r = self._run_one(self._procs[0], case, d, keep)
      if r.status == "fail" and case.kind == "positive" and self._divergence_left > 0:
        self._divergence_left -= 1
        self._diverge(self._procs[0], case, r, d)
    finally: _emptied(d)
    return self._explained(r, case)

  def _explained(self, r: Result, case) -> Result:
    return explained(r, case, self.backend_arg, self.profile, self.explicit_profile, self.verify)

  def close(self):
    for p in self._procs: p.stop()
    if hasattr(self, "_tmp"): shutil.rmtree(self._tmp, ignore_errors=True)

  def _pin(self, case) -> str | None:
    """Why the case is not trusted (its files do not match its sha256 pin), or None."""
    if not self.verify: return None
    return verify(case)

  def run(self, cases, explain: bool = True, keep: bool = False) -> list[Result]:
    """Every case (pins verified first), then the first divergent node of the first
    `divergence` failing positive cases, in the cases' order; explain: each failure's
    message made to stand alone (failures.explain; otherwise the caller does it: what a
    shard leaves to the command that gathers the shards); keep: the backend process kept
    running for the next run (else stopped; close() stops it). Interrupted (KeyboardInterrupt,
    Terminated): the backend's process group is killed, self.results keeps what
    finished, and the exception goes on to the caller."""
    self.capabilities()
    results = self.results = {}
    self.stopping = False
    self._cases = {c.id: c for c in cases}
    todo = []
    for c in cases:
      out = self.manifest.excluded(c.id)
      why = None if out else self.unsupported(c)
      bad = None if out or why else self._pin(c)
      if out: self._record(results, Result(c.id, self.name, "skip", f"excluded by the manifest: {out}"))
      elif why: self._record(results, Result(c.id, self.name, "unsupported", why))
      elif bad: self._record(results, Result(c.id, self.name, "error", bad))
      else: todo.append(c)
    q: queue.Queue = queue.Queue()
    for u in self._units(todo): q.put(u)
    tmp = Path(tempfile.mkdtemp(prefix="tinyspec-conformance-"))
    try:
      # (in a thread: the caller's thread waits in join(), which wakes for signals)
      t = threading.Thread(target=self._serve, args=(self._procs[0], q, results, tmp, cases), daemon=True)
      t.start()
      while t.is_alive(): t.join(0.2)
    except BaseException:
      self.stopping = True
      for p in self._procs: p.kill()
      raise
    finally:
      if not keep:
        for p in self._procs: p.stop()
      shutil.rmtree(tmp, ignore_errors=True)
    out = [results[c.id] for c in cases if c.id in results]
    if explain:
      for r in out: self._explained(r, self._cases.get(r.case))
    return out

  def _serve(self, proc, q: queue.Queue, results: dict, tmp: Path, cases) -> None:
    """The queue's units on the backend process, then the divergence searches."""
    self._work(proc, q, results, tmp)
    left = self.divergence
    for c in cases:   # the first failing ones in the cases' order: the same whichever shards the cases ran in
      r = results.get(c.id)
      if left <= 0 or self.stopping: return
      if r is None or r.status != "fail" or c.kind != "positive": continue
      left -= 1
      d = Path(tempfile.mkdtemp(dir=tmp))
      try: self._diverge(proc, c, r, d)
      finally: shutil.rmtree(d, ignore_errors=True)

  def _units(self, cases) -> list[list]:
    size = max(1, int(self.batch or 1))
    if size == 1: return [[c] for c in cases]
    singles = [[c] for c in cases if not batchable(c)]
    group = [c for c in cases if batchable(c)]
    return [group[k:k + size] for k in range(0, len(group), size)] + singles

  def _record(self, results, r: Result):
    if self.stopping: return   # an interrupted run: what its killed backends answer is no result
    reason = self.manifest.reason(r.case) if r.status in ("pass", "fail", "error") else None
    if reason is not None:
      if r.status == "pass": r.status, r.message = "xpass", f"passed, but the manifest expects a failure: {reason}"
      else: r.status, r.message = "xfail", f"{r.message} (expected: {reason})"
    with self._lock: results[r.case] = r

  def _work(self, proc: BackendProcess, q: queue.Queue, results, tmp: Path):
    while not self.stopping:
      try: unit = q.get_nowait()
      except queue.Empty: return
      d = _scratch(tmp / "unit")
      try:
        if len(unit) == 1: self._record(results, self._run_one(proc, unit[0], d))
        else:
          for r in self._run_batch(proc, unit, d):
            if r.status == "pass": self._record(results, r)
            else: q.put([next(c for c in unit if c.id == r.case)])   # decided by a run on its own
      except Exception as e:   # a broken case folder (or a bug here): that case's error, and the run goes on
        if self.stopping: return
        for c in unit: self._record(results, Result(c.id, self.name, "error", f"runner: {type(e).__name__}: {e}"[:500]))
      finally:
        _emptied(d)

  def _diverge(self, proc, case, r: Result, d: Path) -> Result:
    """A failing positive case's first divergent node, in r.divergence and its message."""
    def run(graph_file, inputs):
      sub = Path(tempfile.mkdtemp(dir=d))
      try: ans = self._run(proc, f"{case.id} (cut)", graph_file, inputs, sub, self.timeout)
      except BackendDied as e: raise RuntimeError(f"{e.kind}: {e}") from None
      if not ans.get("ok"): raise RuntimeError(str(ans.get("error", "refused"))[:200])
      return read_outputs(ans, sub)
    try: dv = first_divergent(case, run, self.decomposed, self.profile, message=r.message)
    except Exception as e:   # the search is a help: it never loses the result
      r.message += f"\n  first divergent node: not searched ({type(e).__name__}: {str(e)[:200]})"
      return r
    r.divergence = dv.to_json()
    r.message += "\n  " + dv.line()
    return r

  def _ensure(self, proc: BackendProcess):
    if not proc.alive(): proc.start(timeout=max(self.timeout, 120.0))

  def _run(self, proc, rid: str, graph, inputs: dict, d: Path, timeout: float) -> dict:
    self._ensure(proc)
    return proc.run(rid, graph, inputs, d, timeout)

  def _run_one(self, proc, case, d: Path, keep: dict | None = None) -> Result:
    t0 = time.perf_counter()
    try:
      ans = self._run(proc, case.id, case.graph, case.inputs, d, self.timeout)
    except BackendDied as e:
      return Result(case.id, self.name, "error", f"{e.kind}: {e}", time.perf_counter() - t0)
    except (FileRefused, RequestTooLong) as e:   # an input the runner cannot send (inline arrays are read here)
      return Result(case.id, self.name, "error", f"input: {e}", time.perf_counter() - t0)
    st, msg, prof = self._judge(case, ans, d, keep)
    return Result(case.id, self.name, st, msg, time.perf_counter() - t0, prof)

  def _judge(self, case, ans: dict, d: Path, keep: dict | None = None) -> tuple[str, str, dict]:
    """(status in the run's profile, message, {profile: pass/fail}); `keep` gets the
    outputs the backend gave."""
    if case.kind == "negative":
      why = judge_negative(case, ans)
      st = "fail" if why else "pass"
      return st, why or "", {p: st for p in PROFILES}
    if not ans.get("ok"):
      return "fail", "refused: " + str(ans.get("error", "no reason given"))[:1000], {p: "fail" for p in PROFILES}
    try: outs = read_outputs(ans, d)
    except (FileRefused, BadAnswer) as e: return "fail", f"unreadable output: {e}", {p: "fail" for p in PROFILES}
    if keep is not None: keep.update(outs)
    try: whys = judge_profiles(case, outs, self.decomposed)
    except FileRefused as e:   # the case's own arrays cannot be read: the case's error, not the backend's
      return "error", f"the case cannot be judged: {e}", {p: "fail" for p in PROFILES}
    return self._verdict(whys)

  def _verdict(self, whys: dict) -> tuple[str, str, dict]:
    why = whys[self.profile]
    other = whys["portable"] if self.profile == "strict" else whys["strict"]
    msg = why or ""
    if why is None and other is not None and self.profile == "portable": msg = "portable (not strict: " + other[:300] + ")"
    return ("fail" if why else "pass"), msg, {p: "fail" if w else "pass" for p, w in whys.items()}

  def _run_batch(self, proc, unit, d: Path) -> list[Result]:
    t0 = time.perf_counter()
    m = merge(unit)
    if m is None: return [Result(c.id, self.name, "fail", "not merged") for c in unit]
    path = write(m, d)
    try:
      ans = self._run(proc, f"batch of {len(unit)}", path, m.inputs, d, self.timeout * (1 + len(unit) / 16))
    except BackendDied as e:
      return [Result(c.id, self.name, "error", str(e)) for c in unit]
    except (FileRefused, RequestTooLong):   # too large inline, or an unreadable input: each case decides alone
      return [Result(c.id, self.name, "fail", "not run in a batch") for c in unit]
    if not ans.get("ok"): return [Result(c.id, self.name, "fail", "batch refused") for c in unit]
    try: outs = m.split(read_outputs(ans, d))
    except (FileRefused, BadAnswer) as e: return [Result(c.id, self.name, "fail", f"unreadable output: {e}") for c in unit]
    dt = (time.perf_counter() - t0) / len(unit)
    out = []
    for c in unit:
      st, msg, prof = self._verdict(judge_profiles(c, outs.get(c.id, {}), self.decomposed))
      out.append(Result(c.id, self.name, st, msg, dt, prof))
    return out


def _scratch(d: Path) -> Path:
  """The folder a run's files go to, made once and emptied after each use (_emptied): a
  folder removed and made again per case costs a file system that discards on delete
  milliseconds each. Where something is left that cannot be removed, a new folder (no
  file of an earlier run may pass for an output of this one)."""
  d.mkdir(exist_ok=True)
  if next(_emptied(d).iterdir(), None) is not None: return Path(tempfile.mkdtemp(dir=d.parent))
  return d


def _emptied(d: Path) -> Path:
  try:
    for p in d.iterdir():
      if p.is_dir() and not p.is_symlink(): shutil.rmtree(p, ignore_errors=True)
      else: p.unlink(missing_ok=True)
  except OSError: pass   # (what is left makes _scratch take a new folder)
  return d


# ------------------------------------------------------------------ coverage
_RANK = {"failed": 3, "xfail": 2, "portable": 1.5, "passed": 1, "unsupported": 0}
_COVER = {"pass": "passed", "fail": "failed", "error": "failed", "xpass": "failed", "xfail": "xfail", "unsupported": "unsupported"}


def coverage(cases, results) -> dict:
  """{op: {dtype: status}} over the positive cases' `covers`: failed if one failed (or
  passed unexpectedly), else xfail, else portable (passed, but only in the portable
  profile), else passed (strict), else unsupported."""
  by_id = {r.case: r for r in results}
  out: dict = {}
  for c in cases:
    r = by_id.get(c.id)
    if r is None or c.kind != "positive": continue
    st = _COVER.get(r.status)
    if st is None: continue
    if st == "passed" and r.profiles.get("strict") == "fail": st = "portable"   # met the portable profile only
    for op, dt in c.covers:
      cur = out.setdefault(op, {}).get(dt)
      if cur is None or _RANK[st] > _RANK[cur]: out[op][dt] = st
  return {op: dict(sorted(v.items())) for op, v in sorted(out.items())}
