"""The classification table (classes.yaml): which class each failing graph of tinygrad's
suite belongs to, by test id pattern and/or failure signature, each rule with its reason.

A rule matches a failing graph when every condition it gives holds: `stage` (import,
valid, agree, time; `test` for a tinygrad test that failed as run, its error the test's), `level` (tensor, kernel, program), `test` (fnmatch globs on the
pytest node id, any of them), `signature` (a regular expression searched in the
"STAGE: error" text), `diagnosis` (a diagnosis of diagnose.py confirmed on the graph,
or the evidence of check.py), `pattern` (the graph holds the pattern a diagnosis
rewrites, confirmed or not) and `ops` (the graph holds one of these ops). The first rule that matches classifies it; a failure no rule matches is
unclassified.
"""
from __future__ import annotations
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path
import yaml
from tinyspec.interop.suite.diagnose import DIAGNOSES
from tinyspec.interop.suite.check import EVIDENCE, LEVELS, STAGES

TABLE = Path(__file__).resolve().parent / "classes.yaml"
KINDS = ("tinyspec-defect", "tinygrad-bug", "tinygrad-divergence", "allowed-variant", "capture-limitation")
_KEYS = {"id", "class", "ref", "stage", "level", "test", "signature", "diagnosis", "pattern", "ops", "reason"}


class TableError(ValueError):
  """The classification table cannot be used (its file, rule id and what is wrong)."""


@dataclass(frozen=True)
class Rule:
  id: str
  kind: str
  ref: str
  reason: str
  stage: tuple = ()
  level: tuple = ()
  test: tuple = ()
  signature: re.Pattern | None = None
  diagnosis: str | None = None
  ops: tuple = ()
  pattern: str | None = None

  def matches(self, test: str, level: str, stage: str, error: str, diagnoses=(), ops=(), patterns=()) -> bool:
    if self.diagnosis is not None and self.diagnosis not in diagnoses: return False
    if self.pattern is not None and self.pattern not in patterns: return False
    if self.ops and not set(self.ops) & set(ops): return False
    if (self.stage and stage not in self.stage) or (stage == "test" and "test" not in self.stage): return False   # a failed test: asked for by name
    if self.level and level not in self.level: return False
    if self.test and not any(fnmatch.fnmatchcase(test, p) for p in self.test): return False
    return self.signature is None or self.signature.search(f"{stage}: {error}") is not None


def load_rules(path=None) -> list[Rule]:
  """The rules of the table at path (default: the shipped classes.yaml), checked."""
  path = Path(path) if path else TABLE
  try: doc = yaml.safe_load(path.read_text(encoding="utf-8"))
  except (OSError, yaml.YAMLError) as e: raise TableError(f"{path}: cannot read the classification table: {e}") from None
  if not isinstance(doc, dict) or not isinstance(doc.get("rules"), list):
    raise TableError(f"{path}: a classification table is a mapping with a list `rules`")
  rules, seen = [], set()
  for k, r in enumerate(doc["rules"]):
    rule = _rule(path, k, r)
    if rule.id in seen: raise TableError(f"{path}: rule {rule.id}: the id is used twice")
    seen.add(rule.id)
    rules.append(rule)
  return rules


def _rule(path: Path, k: int, r) -> Rule:
  if not isinstance(r, dict): raise TableError(f"{path}: rule #{k}: not a mapping")
  rid = r.get("id") or f"#{k}"
  def bad(msg): return TableError(f"{path}: rule {rid}: {msg}")
  if extra := set(r) - _KEYS: raise bad(f"unknown keys {sorted(extra)} (known: {sorted(_KEYS)})")
  for key in ("id", "class", "ref", "reason"):
    if not isinstance(r.get(key), str) or not r[key].strip(): raise bad(f"`{key}` (text) is required")
  if r["class"] not in KINDS: raise bad(f"class {r['class']!r} is not one of {', '.join(KINDS)}")
  if not {"test", "signature", "diagnosis"} & set(r): raise bad("give `test` (globs of test ids), `signature` (a regex) or `diagnosis`")
  if "diagnosis" in r and r["diagnosis"] not in DIAGNOSES and r["diagnosis"] not in EVIDENCE:
    raise bad(f"diagnosis {r['diagnosis']!r} is not one of {', '.join([*DIAGNOSES.names(), *EVIDENCE])} (interop/suite/diagnose.py, check.py)")
  if "pattern" in r and r["pattern"] not in DIAGNOSES:
    raise bad(f"pattern {r['pattern']!r} is not one of {', '.join(DIAGNOSES.names())} (interop/suite/diagnose.py)")
  try: sig = re.compile(r["signature"]) if "signature" in r else None
  except (re.error, TypeError) as e: raise bad(f"signature is not a regular expression: {e}") from None
  stage, level, test, ops = (_strings(r.get(key), bad, key) for key in ("stage", "level", "test", "ops"))
  if set(stage) - set(STAGES) - {"test"}: raise bad(f"stage must be among {', '.join(STAGES)}, test")
  if set(level) - set(LEVELS): raise bad(f"level must be among {', '.join(LEVELS)}")
  return Rule(rid, r["class"], r["ref"], " ".join(r["reason"].split()), stage, level, test, sig, r.get("diagnosis"), ops, r.get("pattern"))


def _strings(v, bad, key) -> tuple:
  if v is None: return ()
  if isinstance(v, str): return (v,)
  if isinstance(v, list) and all(isinstance(x, str) for x in v): return tuple(v)
  raise bad(f"`{key}` is text or a list of texts")


def classify(rules: list[Rule], test: str, level: str, stage: str, error: str, diagnoses=(), ops=(), patterns=()) -> Rule | None:
  """The first rule matching this failing graph, or None (unclassified)."""
  return next((r for r in rules if r.matches(test, level, stage, error, diagnoses, ops, patterns)), None)
