"""The records of a captured run (plugin.py) -> figures, the classified failures and the
summary line.

    python -m tinyspec.interop.suite report DIR [--classes FILE] [--json FILE] [--rediagnose] [--recheck]

prints every failing graph (its class, rule, test id, graph, stage and error), the tests
that failed as run (tinygrad's own assertion, or an error under the capture), the count
of each class, and last:

    tinygrad suite: S schedules from T tests; imported I%, valid V%, agree A%, unclassified U

S counts the captured realizes that scheduled at least one CALL; T the tests whose call
phase ran. A schedule is imported when each of its graphs imported, valid when each also
validated, agrees when each also matched tinygrad's values; U counts the failing
schedules with a failure no rule classifies. Percentages are rounded down.
--rediagnose and --recheck work on the graphs the run kept (DIR/failing/, kept.py).
Exit status: 0 (every failure classified), 1 (some unclassified), 2 (no records, or the
table or a record cannot be read).
"""
from __future__ import annotations
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from tinyspec.interop.suite.classify import classify

_NOT_IMPORTED, _NOT_VALID = {"import", "time"}, {"import", "time", "valid"}


class RecordError(ValueError):
  """The records cannot be read (the file, line and why)."""


def load(out) -> list[dict]:
  """Every record of every records-*.jsonl in the folder out."""
  recs = []
  for f in sorted(Path(out).glob("records-*.jsonl")):
    for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
      if not line.strip(): continue
      try: recs.append(json.loads(line))
      except json.JSONDecodeError as e: raise RecordError(f"{f}:{n}: not a JSON record: {e}") from None
  return recs


@dataclass
class Failure:
  test: str
  graph: str
  level: str
  stage: str
  error: str
  rule: object = None   # classify.Rule, or None: unclassified
  diagnoses: tuple = ()

  def line(self) -> str:
    who = f"{self.rule.kind} [{self.rule.id}: {self.rule.ref}]" if self.rule else "UNCLASSIFIED"
    shown = f" (shown: {', '.join(self.diagnoses)})" if self.diagnoses else ""
    return f"{who} {self.test} {self.graph}: {self.stage}: {self.error}{shown}"


@dataclass
class Summary:
  schedules: int = 0
  tests: int = 0
  tests_with_schedules: int = 0
  imported: int = 0
  valid: int = 0
  agree: int = 0
  graphs: Counter = field(default_factory=Counter)      # level -> graphs checked
  failures: list = field(default_factory=list)          # Failure, in record order
  unclassified: int = 0                                 # schedules with an unclassified failure
  failed_tests: list = field(default_factory=list)      # (test id, its error, its rule or None): tinygrad's test failed as run here
  seconds: float = 0.0                                  # import and check, all schedules

  def pct(self, n: int) -> str:
    return f"{math.floor(1000 * n / self.schedules) / 10:.1f}%" if self.schedules else "n/a"

  def line(self) -> str:
    return (f"tinygrad suite: {self.schedules} schedules from {self.tests} tests; imported {self.pct(self.imported)}, "
            f"valid {self.pct(self.valid)}, agree {self.pct(self.agree)}, unclassified {self.unclassified}")

  def class_lines(self) -> list[str]:
    by = Counter((f.rule.kind, f.rule.id) if f.rule else ("UNCLASSIFIED", "-") for f in self.failures)
    out = [f"{n:6d}  {kind:20s} {rid}" for (kind, rid), n in sorted(by.items(), key=lambda x: (-x[1], x[0]))]
    graphs = ", ".join(f"{n} {lvl}" for lvl, n in sorted(self.graphs.items()))
    return [f"failing graphs by class ({len(self.failures)} of {sum(self.graphs.values())} graphs: {graphs}; "
            f"{self.tests_with_schedules} tests realized a schedule; import and check {self.seconds:.0f} s):", *out]

  def to_json(self) -> dict:
    return {"schedules": self.schedules, "tests": self.tests, "tests_with_schedules": self.tests_with_schedules,
            "imported": self.imported, "valid": self.valid, "agree": self.agree, "unclassified": self.unclassified,
            "graphs": dict(self.graphs), "seconds": round(self.seconds, 1), "line": self.line(),
            "failed_tests": [{"test": t, "error": e, "rule": r.id if r else None} for t, e, r in self.failed_tests],
            "failures": [{"test": f.test, "graph": f.graph, "level": f.level, "stage": f.stage, "error": f.error,
                          "class": f.rule.kind if f.rule else None, "rule": f.rule.id if f.rule else None,
                          "diagnoses": list(f.diagnoses)} for f in self.failures]}


def summarize(records: list[dict], rules) -> Summary:
  s = Summary()
  for rec in records:
    if rec.get("kind") == "test":
      s.tests += bool(rec.get("ran"))
      if rec.get("outcome") == "failed":
        s.failed_tests.append((rec["test"], rec.get("error", ""), classify(rules, rec["test"], "test", "test", rec.get("error", ""))))
      s.tests_with_schedules += rec.get("schedules", 0) > 0
      continue
    s.schedules += 1
    s.seconds += rec.get("seconds", 0.0)
    stages = {g["stage"] for g in rec["graphs"]}
    s.imported += not stages & _NOT_IMPORTED
    s.valid += not stages & _NOT_VALID
    s.agree += stages <= {"ok"}
    unclassified = False
    for g in rec["graphs"]:
      s.graphs[g["level"]] += 1
      if g["stage"] == "ok": continue
      shown = tuple(g.get("diagnoses", ()))
      f = Failure(rec["test"], g["name"], g["level"], g["stage"], g["error"],
                  classify(rules, rec["test"], g["level"], g["stage"], g["error"], shown, g.get("ops", ()), g.get("patterns", ())), shown)
      s.failures.append(f)
      unclassified |= f.rule is None
    s.unclassified += unclassified
  return s
