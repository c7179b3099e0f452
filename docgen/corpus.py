"""The conformance corpora on disk as the generated docs cite them: the rule corpus
(conformance/rules, one case per `*.expect.json`, as conformance.corpus.rulecases loads it) and the
op cases (conformance/cases), counted per op for status.md."""
from __future__ import annotations
import json
from dataclasses import dataclass
from pathlib import Path
import yaml
from tinyspec import conformance
from tinyspec.conformance.corpus.rulecases import load_rule_cases, CorpusError, cases_by_rule


@dataclass(frozen=True)
class RuleCaseRef:
  rule: str | None    # the rule the case is about; None for an op's example case
  op: str | None
  valid: bool
  input: str          # the graph file, relative to the repository root


def corpus_root() -> Path:
  """The folder that holds `conformance/` (its rule and case corpora): the repository in a
  checkout, the installed `tinyspec` package otherwise (the layout is the same below it)."""
  return Path(conformance.__file__).resolve().parent.parent


def rule_cases(root: Path) -> list[RuleCaseRef]:
  """The rule corpus under root/conformance/rules, as conformance.corpus.rulecases loads it (one
  case per `*.expect.json`, whatever else the folders hold). Sorted by input path; empty
  when there is no corpus (or it cannot be read: the docs then show no cases)."""
  base = Path(root) / "conformance" / "rules"
  if not base.is_dir(): return []
  try: cases = load_rule_cases(base)
  except CorpusError: return []
  out = [RuleCaseRef(c.rule, c.op, c.valid, _relative(c.input, Path(root))) for c in cases]
  return sorted(out, key=lambda c: c.input)


def _relative(p: Path, root: Path) -> str:
  try: return Path(p).resolve().relative_to(root.resolve()).as_posix()
  except ValueError: return Path(p).as_posix()


def rule_case_files(root: Path) -> dict[str, list[RuleCaseRef]]:
  """rule id -> its cases (invalid ones first, then valid), as cases_by_rule groups them."""
  grouped = cases_by_rule(rule_cases(root))
  return {r: sorted(g["invalid"] + g["valid"], key=lambda c: (c.valid, c.input)) for r, g in grouped.items()}


def case_ops(root: Path) -> tuple[dict[str, int], int]:
  """conformance/cases/**: how many cases stand for each op, and the number of cases. A
  case folder (conformance/cases/README.md: a `case.json`) counts once, for the ops its
  `covers` names (a negative case: the ops of its graph); any other graph file counts for
  its `meta.ops`, else the ops of its nodes."""
  base = Path(root) / "conformance" / "cases"
  counts: dict[str, int] = {}
  n = 0
  if not base.is_dir(): return counts, 0
  folders = {p.parent for p in base.rglob("case.json")}
  for p in sorted(base.rglob("*")):
    if not p.is_file() or p.suffix not in (".json", ".yaml", ".yml"): continue
    if p.parent in folders and p.name != "case.json": continue
    n += 1
    for op in sorted(_case_ops_of(p) if p.name == "case.json" else _ops_named_by(p)): counts[op] = counts.get(op, 0) + 1
  return counts, n


def _case_ops_of(p: Path) -> set[str]:
  try: d = json.loads(p.read_text())
  except (OSError, ValueError): return set()
  if not isinstance(d, dict): return set()
  if d.get("covers"): return {str(c[0]) for c in d["covers"] if isinstance(c, list) and c}
  return {str(o) for o in d.get("ops", [])}


def _ops_named_by(p: Path) -> set[str]:
  try:
    text = p.read_text()
    doc = json.loads(text) if p.suffix == ".json" else yaml.safe_load(text)
  except (OSError, ValueError, yaml.YAMLError):
    return set()
  meta = doc.get("meta") if isinstance(doc, dict) else None
  if isinstance(meta, dict) and isinstance(meta.get("ops"), list): return {str(o) for o in meta["ops"]}
  nodes = doc.get("nodes") if isinstance(doc, dict) else doc
  if not isinstance(nodes, list): return set()
  return {n["op"] for n in nodes if isinstance(n, dict) and isinstance(n.get("op"), str)}
