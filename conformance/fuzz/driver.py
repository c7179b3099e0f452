"""`fuzz()`: the properties of checks.py on graphs drawn from the tables, for one backend,
under Hypothesis; each minimal failing case is kept.

The search goes in rounds (search.py), one per Focus (foci(): every level, op and dtype
class the backend runs, shuffled by the run's --seed), each drawing a graph and a mutant of it
(mutations.with_mutants). A failure is shrunk by Hypothesis, then made smaller still
(shrink.py), triaged and (with `out`) written as a corpus case. A backend with a
`triage(failure, out)` method sorts each failure: a documented bug of its target or a
limit of its adapter is counted apart (FuzzReport.known, .unsupported), not as a failure
(the tinygrad backend's: interop/hunt.py).
"""
from __future__ import annotations
import hashlib
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
import shutil
import tempfile
import json
from tinyspec.backends import get_backend
from tinyspec.dtypes import DTYPES
from tinyspec.files import FileRefused, make_dir, write_file
from tinyspec.refimpl import supported_ops
from tinyspec.tables import tables
from tinyspec.conformance.corpus.casegen import Draft, write_draft
from tinyspec.conformance.fuzz.checks import Failure, check_example, check_mutant
from tinyspec.conformance.fuzz.graphs import drawable_ops, graphs, value_dtypes
from tinyspec.conformance.fuzz.mutations import with_mutants
from tinyspec.conformance.fuzz.runners import InProcess, Isolated
from tinyspec.conformance.fuzz.search import search
from tinyspec.conformance.fuzz.shrink import smaller
from tinyspec.conformance.cluster import split


@dataclass
class FuzzReport:
  backend: str
  profile: str = "strict"                         # the conformance profile the values were judged by
  examples: int = 0
  seconds: float = 0.0
  failures: list = field(default_factory=list)    # Failure, each minimal
  refused: dict = field(default_factory=dict)     # rule id -> valid graphs the backend refused with it
  written: list = field(default_factory=list)     # case folders written
  unwritten: list = field(default_factory=list)   # FileRefused: a failure that could not be written under out
  known: list = field(default_factory=list)       # failures the backend's triage matched to a documented bug (not failures)
  unsupported: dict = field(default_factory=dict) # what the backend's triage found beyond its adapter -> count (not failures)


EXPLORE_PER_ROUND = 4   # examples per focus after the first pass
SHRINK_CALLS = 150      # checks spent shrinking one failure at most (each may run the backend)


class NoDrawableOps(ValueError):
  """Nothing can be drawn for the backend at the levels asked for."""


def backend_ops(caps, level: str, ops=None) -> list[str]:
  """The ops drawn at `level` for a backend: drawable there, run by the backend and by
  the reference evaluator at that level."""
  ref = supported_ops()
  return [op for op in drawable_ops(level, None, ops) if level in caps.ops.get(op, ()) and level in ref.get(op, ())]


def backend_strategy(caps, level: str, max_ops: int = 6, ops=None, focus=None, salt: int = 0):
  """graphs() restricted to what the backend and the reference evaluator both run;
  focus (a Focus): the last op drawn is its op, its first source of its dtypes."""
  dts = [x for x in value_dtypes() if x in caps.dtypes]
  if focus is None: return graphs(level, ops=backend_ops(caps, level, ops), max_ops=max_ops, dtypes=dts)
  return graphs(level, ops=backend_ops(caps, level, ops), max_ops=max_ops, dtypes=dts, final_op=focus.op,
                final_dtypes=focus.dtypes, salt=salt)


@dataclass(frozen=True)
class Focus:
  """What one round of the fuzz aims at: an op at a level, its first value source of
  one dtype class (bool, int, uint, float, index)."""
  level: str
  op: str
  dtypes: tuple


def foci(caps, levels, seed: int) -> list[Focus]:
  """Every (level, op, dtype class) the backend runs, in an order shuffled by the run's --seed.
  Hypothesis draws mostly variations of what it drew before (200 examples of a graph
  strategy hold about 50 distinct first choices), so left alone it reaches a few of
  the ~90 ops x dtype classes; the fuzz gives each its own round instead."""
  T = tables()
  out = []
  rng = random.Random(seed)
  for level in levels:
    for op in backend_ops(caps, level):
      slot = next((sl for sl in T.ops[op].slots if sl.kind == "value"), None)
      allowed = (slot.allowed() if slot is not None else None) or set(value_dtypes())
      dts = [x for x in value_dtypes() if x in allowed and x in caps.dtypes]
      for cls in dict.fromkeys(DTYPES[x].cls for x in dts):
        group = [x for x in dts if DTYPES[x].cls == cls]
        rng.shuffle(group)   # the zero choice takes the first: each dtype its turn across seeds
        out.append(Focus(level, op, tuple(group)))
  rng.shuffle(out)
  return out


def fuzz(backend, examples: int = 100, seed: int = 0, out: Path | None = None, levels=("tensor", "kernel"),
         stages: bool = True, isolate: bool = True, strategy=None, max_ops: int = 6, log=None, timeout: float = 60.0,
         profile: str | None = None, triage=None, database=None, database_key: bytes | None = None) -> FuzzReport:
  """Run the properties on `examples` drawn graphs (split over the levels), here. Each
  failure is shrunk by Hypothesis, cut to the failing node and what it reads, and (with
  `out`) written as a corpus case; the search then goes on, skipping failures of the same
  property, op and dtype, until the examples are spent.

  Without `strategy` the search goes in rounds, one per Focus (foci(): every level, op
  and dtype class of the backend, shuffled by the run's --seed): a first pass draws one example
  of each (Hypothesis's zero choice, which the strategies make an edge-dense one), later
  passes let Hypothesis explore each focus for a few examples. The rounds are cut into the
  units of `unit_shares` (each its own search: graphunits.py runs the same units on Dask
  workers) and merged in their order. Failures are triaged (see the module docstring;
  `triage` overrides the backend's own). database, database_key: a Hypothesis example
  database whose failing examples each round replays first (search.py)."""
  t0 = time.monotonic()
  runner = Isolated(backend, timeout) if isolate and isinstance(backend, str) else InProcess(backend)
  try:
    runner.profile = profile or getattr(runner.caps, "profile", "strict")
    if strategy is not None:
      rep = _fuzz_strategy(runner, backend, strategy, examples, seed, out, stages, log, triage, database, database_key)
    else:
      h = hunter(backend, runner, levels, seed, stages, max_ops, triage)
      results = [hunt_unit(h, start, share, database, database_key, keep=out is not None) for start, share in unit_shares(examples)]
      rep = merge(results, runner.name, runner.profile, out, log)
  finally:
    runner.stop()
  rep.seconds = time.monotonic() - t0
  return rep


def _fuzz_strategy(runner, backend, strategy, examples: int, seed: int, out, stages: bool, log, triage, database, database_key):
  """The given strategy's examples in one search, then another for what is left of the
  budget after each failure (the rounds of a Hypothesis strategy a caller gives)."""
  rep = FuzzReport(runner.name, runner.profile)
  stage_backend = _stage_backend(backend, runner) if stages else None
  triage = triage or _triage_of(backend, runner)
  seen: set = set()
  check = _checker(runner, stage_backend, runner.caps.decomposed, rep.refused, seen)
  budget, round_ = examples, 0
  while budget > 0:
    count, f = search(with_mutants(strategy, round_), budget, seed + round_, check, seen, shrink_calls=SHRINK_CALLS,
                      unsatisfiable_ok=True, log=log, database=database, database_key=database_key)
    rep.examples += count
    budget -= max(count, 1)
    round_ += 1
    if f is None: break
    f = smaller(f, runner, stage_backend, runner.caps.decomposed)
    seen.add(f.signature)
    _record(rep, f, triage, out, log)
  return rep


# ------------------------------------------------------------------ units of rounds
UNIT_EXAMPLES = 50     # examples per unit at most (graphunits.py: the same units on one process, N processes, a cluster)
OUT_MARK = "<OUT>"     # in a unit's log lines: where its files go (the --out folder, once they are there)


@dataclass
class Hunter:
  """What a unit's search runs with: the backend's runner, the backend object whose stages
  are checked (None: none), its triage, the run's seed, foci and graph size."""
  runner: object
  stage_backend: object
  triage: object
  seed: int
  plan: list
  max_ops: int


def hunter(backend, runner, levels, seed: int, stages: bool = True, max_ops: int = 6, triage=None) -> Hunter:
  """The Hunter of a run on `runner` (NoDrawableOps where no level asked for has an op to draw)."""
  levels = [lv for lv in levels if backend_ops(runner.caps, lv)]   # `both` draws the levels the backend runs
  if not levels:
    raise NoDrawableOps(f"backend {runner.name} runs no op the graphs can be drawn from at the level(s) asked for "
                        "(its capabilities)")
  return Hunter(runner, _stage_backend(backend, runner) if stages else None, triage or _triage_of(backend, runner), seed,
                foci(runner.caps, levels, seed), max_ops)


def unit_shares(examples: int) -> list[tuple[int, int]]:
  """(first example, examples) of each unit of a run: `examples` cut into UNIT_EXAMPLES at most."""
  out, start = [], 0
  for n in split(examples, UNIT_EXAMPLES):
    out.append((start, n)); start += n
  return out


def segments(start: int, share: int, n_foci: int) -> list[tuple[int, int, int]]:
  """(round, first example in the round, examples) covering the run's examples start ..
  start + share - 1: round r < n_foci draws example r alone (the first pass over the foci),
  each later round EXPLORE_PER_ROUND examples (a unit may begin or end inside one)."""
  out, p, end = [], start, start + share
  while p < end:
    if p < n_foci: r, off, size = p, 0, 1
    else: r, off, size = n_foci + (p - n_foci) // EXPLORE_PER_ROUND, (p - n_foci) % EXPLORE_PER_ROUND, EXPLORE_PER_ROUND
    n = min(size - off, end - p)
    out.append((r, off, n))
    p += n
  return out


def hunt_unit(h: Hunter, start: int, share: int, database=None, database_key: bytes | None = None, keep: bool = True) -> dict:
  """One unit of a run: its rounds (segments) with a budget of `share` checks (a failure's
  shrinking spends it too), skipping failures of a kind it found before. Returns JSON
  (examples, refused, found: each failure's signature, kind and log lines) and, under
  `live`, each found Failure with the files its record wrote ({path relative to --out:
  bytes}; keep=False: none are written, the triage keeps no repro)."""
  refused: dict = {}
  seen: set = set()
  found, live, notes = [], [], []
  check = _checker(h.runner, h.stage_backend, h.runner.caps.decomposed, refused, seen)
  work = Path(tempfile.mkdtemp(prefix="tinyspec-fuzz-unit-"))
  examples, budget = 0, share
  try:
    for round_, off, n in segments(start, share, len(h.plan)):
      if budget <= 0: break
      focus = h.plan[round_ % len(h.plan)]
      strat = backend_strategy(h.runner.caps, focus.level, h.max_ops, focus=focus, salt=h.seed * 7919 + round_)
      key = database_key and (database_key + _focus_key(h.plan, round_))   # a focus's examples replay in that focus
      count, f = search(with_mutants(strat, round_), min(n, budget), h.seed + round_ + 7919 * off, check, seen,
                        shrink_calls=SHRINK_CALLS, unsatisfiable_ok=True, log=notes.append, database=database,
                        database_key=key)   # unsatisfiable: the focus could not be drawn
      examples += count
      budget -= max(count, 1)
      if f is None: continue
      f = smaller(f, h.runner, h.stage_backend, h.runner.caps.decomposed)
      seen.add(f.signature)
      d, files = _found(f, h.triage, work / str(len(found)) if keep else None)
      found.append(d); live.append((f, files))
  finally:
    shutil.rmtree(work, ignore_errors=True)
  return {"examples": examples, "refused": refused, "found": found, "notes": notes, "live": live}


def _found(f: Failure, triage, where: Path | None) -> tuple[dict, dict]:
  """A unit's failure recorded (triaged; written as a case under `where`, unless None): its
  JSON and the files written, by their path relative to `where`."""
  rep = FuzzReport("?")
  lines: list = []
  _record(rep, f, triage, where, lines.append)
  kind = "known" if rep.known else "unsupported" if rep.unsupported else "failure"
  here = where is not None and where.is_dir()
  files = {p.relative_to(where).as_posix(): p.read_bytes() for p in sorted(where.rglob("*")) if p.is_file()} if here else {}
  repro = getattr(f.triage, "repro", None)
  d = {"signature": json.dumps(list(f.signature)), "kind": kind, "why": next(iter(rep.unsupported), None), "text": str(f),
       "lines": [x.replace(str(where), OUT_MARK) if where is not None else x for x in lines],
       "case": [p.relative_to(where).as_posix() for p in rep.written], "unwritten": [str(e) for e in rep.unwritten],
       "repro": Path(repro).relative_to(where).as_posix() if here and repro is not None and Path(repro).is_relative_to(where) else None}
  return d, files


class _Stored:
  """A failure of a unit finished in an earlier run (the findings database's record of it)."""
  def __init__(self, d: dict):
    self.signature, self.text, self.triage = tuple(json.loads(d["signature"])), d["text"], None
  def __str__(self): return self.text


def merge(results, name: str, profile: str, out: Path | None, log=None) -> FuzzReport:
  """The units' results, in their order, as one FuzzReport: a kind of failure that several
  units found is the first one's; the files of the failures kept written under out (their
  log lines say where)."""
  rep = FuzzReport(name, profile)
  seen: set = set()
  for r in results:
    rep.examples += r["examples"]
    for k, v in r["refused"].items(): rep.refused[k] = rep.refused.get(k, 0) + v
    for note in r.get("notes", ()):
      if log: log(note)
    live = r.get("live") or [(_Stored(d), {}) for d in r["found"]]
    for d, (f, files) in zip(r["found"], live):
      if d["signature"] in seen: continue
      seen.add(d["signature"])
      if d["kind"] == "unsupported": rep.unsupported[d["why"]] = rep.unsupported.get(d["why"], 0) + 1
      else: (rep.known if d["kind"] == "known" else rep.failures).append(f)
      try:
        if out is not None:
          for rel, data in files.items(): make_dir((Path(out) / rel).parent); write_file(Path(out) / rel, data)
          rep.written += [Path(out) / c for c in d["case"]]
      except FileRefused as e: rep.unwritten.append(e)
      rep.unwritten += [FileRefused(out, "path.write", u) for u in d["unwritten"]]
      if d["repro"] and getattr(f, "triage", None) is not None: f.triage.repro = Path(out) / d["repro"] if out is not None else None
      for line in d["lines"]:
        if log: log(line.replace(OUT_MARK, str(out) if out is not None else "."))
  return rep


def _focus_key(plan, round_: int) -> bytes:
  """The part of a round's example database key that names its focus."""
  if plan is None: return b""
  f = plan[round_ % len(plan)]
  return f"/{f.level}/{f.op}/{f.dtypes[0] if f.dtypes else ''}".encode()


def _checker(runner, stage_backend, decomposed: bool, refused: dict, seen: set):
  """check(pair, found) for search(): the mutant's rule first, then the drawn graph's
  properties (while a failure is shrunk, only its kind of property)."""
  def check(pair, found):
    d, mutant = pair
    f = check_mutant(d, mutant)
    if f is not None and f.signature not in seen: return f
    kind = None if found is None else ("stages" if found.prop.startswith("stage") else found.prop)
    return check_example(d, runner, stage_backend, decomposed, refused, only=kind if kind in ("values", "run", "stages") else None)
  return check


def _stage_backend(backend, runner):
  """The backend object whose stages() are checked, built in this process (a Python
  backend's), or None."""
  if isinstance(runner, InProcess): return runner.backend
  try: return get_backend(backend)
  except (KeyError, TypeError): return None


def _triage_of(backend, runner):
  """The backend's triage(failure, out) -> verdict, where it has one, else None."""
  obj = getattr(runner, "backend", None)
  if obj is None and isinstance(backend, str):
    try: obj = get_backend(backend)
    except (KeyError, TypeError, ValueError): obj = None
  return getattr(obj, "triage", None)


def _record(rep: FuzzReport, f: Failure, triage, out, log) -> None:
  """A found failure into the report, after the backend's triage: a documented bug or a
  limit of its adapter is counted apart; anything else is a failure (kept under out)."""
  v = f.triage = triage(f, Path(out) if out is not None else None) if triage is not None and f.prop != "mutant" else None
  kind, repro = getattr(v, "kind", None), getattr(v, "repro", None)
  if kind == "documented":
    rep.known.append(f)
    if log: log(f"KNOWN {getattr(v, 'label', v.bug)}: {f}" + (f"\n  repro: {repro} (fails on tinygrad)" if repro else ""))
  elif kind == "unsupported":
    rep.unsupported[v.why] = rep.unsupported.get(v.why, 0) + 1
    if log: log(f"UNSUPPORTED {v.why}: {f}")
  else:
    rep.failures.append(f)
    if log: log(f"NEW {f}\n  " + (f"repro: {repro} (fails on tinygrad)" if repro else f"no repro kept: {v.note}"[:400]) if kind == "new" else f"FAIL {f}")
    if out is not None and f.prop != "mutant": _keep(rep, f, Path(out))   # a mutant's failure is the validator's


def _keep(rep: FuzzReport, f: Failure, out: Path) -> None:
  """Write f under out; an out that cannot be written is reported, not a crash of the search."""
  try: rep.written.append(write_failure(f, out))
  except FileRefused as e: rep.unwritten.append(e)


def write_failure(f: Failure, out: Path) -> Path:
  """The minimal failing case as a corpus case under out/fuzz/<signature>-<hash>/."""
  make_dir(out)   # FileRefused path.write where it cannot be made
  m = f.case()
  h = hashlib.sha256(m.graph.dumps().encode()).hexdigest()[:10]
  cid = f"fuzz/{(f.op or 'graph')}-{f.dtype or 'any'}-{h}"
  write_draft(Draft(cid, m.graph, dict(m.inputs), [(f.op, f.dtype)] if f.op and f.dtype else [], f"found by tinyspec fuzz: {f}"[:500]), out)
  return out / cid
