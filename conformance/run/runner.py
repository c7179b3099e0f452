"""The conformance runner: cases through backends, one Result per (case, backend).

A *case* is anything with an `id` and a `kind`. Here: the rule corpus (`kind == "rule"`,
conformance/corpus/rulecases.py) judged in process by *judges* such as tinyspec's own validator
(the pseudo-backend `validator`; more with `register_backend`). Executing backends (ref,
c, opencl, external programs) run the case corpus in worker processes:
conformance/run/execute.py, which reports through the same Result. The runner never lets an
exception out of a case: a judge that crashes gives a Result with status `error`.

Statuses: pass, fail, error (crash, hang, exception), skip (a judge that does not take
the case), xfail / xpass (failed / passed against the backend's manifest),
unsupported (the backend does not declare an op, dtype or device the case needs).
"""
from __future__ import annotations
import time
import traceback
from dataclasses import dataclass, asdict, field
from pathlib import Path
from typing import Callable, Iterable
from tinyspec.conformance.corpus.rulecases import validate_case, load_rule_cases
from tinyspec.conformance.run.selection import select as chosen

STATUSES = ("pass", "fail", "error", "skip", "xfail", "xpass", "unsupported")
UNEXPECTED = ("fail", "error", "xpass")   # a run with any of these exits 1
RAN = ("pass", "fail", "error", "xfail", "xpass")   # a case with one of these ran
EXIT_NOTHING_RAN = 5   # no case ran (none selected, or all unsupported or excluded): pytest's exit 5


@dataclass
class Result:
  case: str           # case id
  backend: str
  status: str         # one of STATUSES (judged in the run's profile)
  message: str = ""   # why it failed / errored / was skipped
  seconds: float = 0.0
  profiles: dict = field(default_factory=dict)   # profile -> "pass" / "fail" for a case the backend ran (conformance/run/execute.py)
  divergence: dict = field(default_factory=dict)  # a failing case's first divergent node (conformance/run/divergence.py)

  def to_json(self) -> dict: return asdict(self)


class Backend:
  """Judges cases. Subclasses set `name` and implement supports() and run()."""
  name = "?"

  def supports(self, case) -> bool: return False

  def run(self, case) -> Result: raise NotImplementedError


class ValidatorBackend(Backend):
  """tinyspec's validator against the rule corpus: does it accept the valid graphs and
  reject the invalid ones with the expected rule id at the expected node?"""
  name = "validator"

  def supports(self, case) -> bool: return getattr(case, "kind", None) == "rule"

  def run(self, case) -> Result:
    mismatch, _ = validate_case(case)
    return Result(case.id, self.name, "fail" if mismatch else "pass", mismatch or "")


BACKENDS: dict[str, Callable[[], Backend]] = {"validator": ValidatorBackend}
DEFAULT_BACKENDS = ("validator",)


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
  """Make a backend available to `tinyspec conformance --backend NAME`."""
  BACKENDS[name] = factory


def load_cases(path: Path | str | None = None) -> list:
  """The cases under path: a rule corpus folder (holding *.expect.json files). Default:
  conformance/rules. Raises rulecases.CorpusError for a missing or malformed corpus."""
  return load_rule_cases(path)


def select(cases: Iterable, patterns: list[str] | None, ids: list[str] | None = None) -> list:
  """Cases whose id matches every -k expression (pytest's grammar: `MAX or IDIV`, `not
  float`, substrings and globs) and, with `ids`, is one of them (conformance/run/selection.py)."""
  return chosen(cases, patterns, ids)


def run_case(case, backend: Backend) -> Result:
  t0 = time.perf_counter()
  if not backend.supports(case):
    return Result(case.id, backend.name, "skip", f"{backend.name} does not run {getattr(case, 'kind', '?')} cases")
  try:
    r = backend.run(case)
  except Exception as e:   # a crashing backend is a result, not a crashed runner
    where = traceback.extract_tb(e.__traceback__)[-1]
    r = Result(case.id, backend.name, "error", f"{type(e).__name__}: {e} (at {Path(where.filename).name}:{where.lineno})"[:500])
  r.seconds = time.perf_counter() - t0
  return r


def run(cases: Iterable, backends: Iterable[Backend], on_result: Callable[[Result], None] | None = None) -> list[Result]:
  """Every case through every backend, in order; on_result sees each Result as it comes."""
  out = []
  for case in cases:
    for b in backends:
      r = run_case(case, b)
      out.append(r)
      if on_result: on_result(r)
  return out


def counts(results: Iterable[Result]) -> dict[str, int]:
  c = {s: 0 for s in STATUSES}
  for r in results: c[r.status] += 1
  return c


def nothing_ran(c: dict[str, int]) -> bool:
  """No case ran: every one was unsupported, excluded or skipped (or there was none)."""
  return not any(c.get(s) for s in RAN)


def ok(c: dict[str, int]) -> bool:
  """No unexpected result: nothing failed, errored or passed against the manifest."""
  return not any(c.get(s) for s in UNEXPECTED)


def count(n: int, noun: str, plural: str | None = None) -> str:
  """`1 error`, `2 errors`: n and the noun in its number."""
  return f"{n} {noun if n == 1 else plural or noun + 's'}"


def summary_line(c: dict[str, int]) -> str:
  """`N passed, N failed`, plus errors and skips when there are any."""
  s = f"{c['pass']} passed, {c['fail']} failed"
  if c["error"]: s += ", " + count(c["error"], "error")
  if c["skip"]: s += f", {c['skip']} skipped"
  if c.get("xfail"): s += ", " + count(c["xfail"], "expected failure")
  if c.get("xpass"): s += ", " + count(c["xpass"], "unexpected pass", "unexpected passes")
  if c.get("unsupported"): s += f", {c['unsupported']} unsupported"
  return s


PROFILES = ("strict", "portable")


def profile_summary(results: Iterable[Result]) -> dict:
  """profile -> {met, passed, failed, expected}: over the cases a backend ran (pass, fail,
  error, xfail, xpass). A profile is met when every case passes in it except those the
  manifest expects to fail (its documented bugs); errors fail every profile."""
  out = {p: {"passed": 0, "failed": 0, "expected": 0} for p in PROFILES}
  for r in results:
    if r.status in ("skip", "unsupported"): continue
    for p in PROFILES:
      if r.status in ("xfail", "xpass"): out[p]["expected"] += 1
      elif r.profiles.get(p) == "pass": out[p]["passed"] += 1
      else: out[p]["failed"] += 1
  for p in PROFILES: out[p]["met"] = out[p]["failed"] == 0 and (out[p]["passed"] + out[p]["expected"]) > 0
  return out


def profile_line(results: list[Result]) -> str:
  """`meets strict` / `meets portable; not strict (N cases ...)` / `meets neither strict nor portable: ...`."""
  ps = profile_summary(results)
  if not any(ps["strict"][k] for k in ("passed", "failed", "expected")): return "profile: not judged (no case ran)"
  xf = ps["strict"]["expected"]
  also = f", {count(xf, 'expected failure')} of the manifest" if xf else ""
  if ps["strict"]["met"]: return f"profile: meets strict (and portable){also}"
  strict = ps["strict"]["failed"]
  if ps["portable"]["met"]:
    return f"profile: meets portable{also}; not strict ({count(strict, 'case')} {'gives' if strict == 1 else 'give'} an allowed result other than the canonical one)"
  bad = ps["portable"]["failed"]
  return (f"profile: meets neither strict nor portable: {count(bad, 'case')} {'gives' if bad == 1 else 'give'} a result that "
          f"is neither the canonical one nor any other the spec allows{also}")


def report_json(results: list[Result], backends: list[str], cases_dir: str, profile: str | None = None) -> dict:
  by: dict = {}
  for r in results: by.setdefault(r.backend, []).append(r)
  return {"format": "tinyspec-conformance-results", "version": 1, "cases": cases_dir, "backends": backends,
          "profile": profile, "summary": counts(results), "profiles": {b: profile_summary(rs) for b, rs in by.items()},
          "results": [r.to_json() for r in results]}
