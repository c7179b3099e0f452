"""The rule corpus (conformance/rules/, layout in its README.md): loading and checking.

A case is an input file plus a `NAME.expect.json` beside it saying what a validator must
answer: valid or not, the exit code, and for an invalid graph the rule id and node it is
rejected with. `load_rule_cases()` lists them; `check_result()` compares what a
validator said with the expectation, so the test suite and `tinyspec conformance` judge
cases the same way.
"""
from __future__ import annotations
import json
from dataclasses import dataclass, field
from pathlib import Path
from tinyspec.graph import load_file
from tinyspec.files import read_text, FileRefused
from tinyspec.limits import limits
from tinyspec.validate import validate_file

RULES_DIR = Path(__file__).resolve().parent.parent / "rules"
EXPECT_SUFFIX = ".expect.json"


class CorpusError(Exception):
  """A malformed case file (a bug in the corpus, not in a validator)."""


@dataclass(frozen=True)
class RuleCase:
  id: str                   # "RESHAPE.numel/invalid-6-to-2x4" (path below the corpus root, no suffix)
  input: Path               # the graph file (may not exist: the file.read cases)
  rule: str | None          # the rule the case is about (its folder), None for op examples
  op: str | None            # the op whose example this is (ops/<OP>/), else None
  valid: bool
  exit: int                 # 0 valid, 1 invalid, 2 unreadable
  expect_rule: str | None   # for invalid cases: the rule id the validator must report
  node: int | None          # ... at this node (None: a file-level error)
  only: bool = True         # every diagnostic carries expect_rule
  level: str = "auto"
  description: str = ""
  expect_file: Path | None = field(default=None, compare=False)

  @property
  def kind(self) -> str: return "rule"

  def ops(self) -> set[str]:
    """Ops named by the input's nodes (empty when it is not a readable JSON/YAML graph)."""
    g, _ = load_file(self.input)
    return {n.op for n in g.nodes} if g is not None else set()


def _case(expect_path: Path, root: Path) -> RuleCase:
  try:
    d = json.loads(read_text(expect_path, limits().max_small_file, "the expectation file"))
    e = d["expect"]
    return RuleCase(
      id=expect_path.relative_to(root).as_posix()[:-len(EXPECT_SUFFIX)],
      input=expect_path.parent / d["input"], rule=d.get("rule"), op=d.get("op"),
      valid=bool(e["valid"]), exit=int(e.get("exit", 0 if e["valid"] else 1)),
      expect_rule=e.get("rule"), node=e.get("node"), only=bool(e.get("only", True)),
      level=d.get("level", "auto"), description=d.get("description", ""), expect_file=expect_path)
  except FileRefused as e:
    raise CorpusError(str(e)) from None
  except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as e:
    raise CorpusError(f"{expect_path}: not a valid case description ({type(e).__name__}: {str(e)[:200]}) [file.schema]") from None


def load_rule_cases(root: Path | str | None = None) -> list[RuleCase]:
  """Every case under root (default conformance/rules), sorted by id."""
  root = Path(root) if root is not None else RULES_DIR
  if not root.is_dir(): raise CorpusError(f"{root}: no such directory")
  return sorted((_case(p, root) for p in root.rglob("*" + EXPECT_SUFFIX)), key=lambda c: c.id)


def cases_by_rule(cases) -> dict[str, dict[str, list[RuleCase]]]:
  """rule id -> {"valid": [...], "invalid": [...]} (op examples count as valid cases of no rule)."""
  out: dict = {}
  for c in cases:
    if c.rule is None: continue
    out.setdefault(c.rule, {"valid": [], "invalid": []})["valid" if c.valid else "invalid"].append(c)
  return out


def check_result(case: RuleCase, exit_code: int, diagnostics: list[dict]) -> str | None:
  """None if the validator's answer matches the case, else what is wrong. `diagnostics`
  are dicts with at least `rule` and `node` (the `--json` error objects)."""
  rules = [d.get("rule") for d in diagnostics]
  if case.valid:
    if exit_code != 0 or diagnostics:
      return f"expected valid, got exit {exit_code}: " + "; ".join(f"node {d.get('node')}: {d.get('message', '')} [{d.get('rule')}]" for d in diagnostics[:3])
    return None
  if exit_code != case.exit:
    return f"expected exit {case.exit}, got {exit_code} (rules {sorted(set(map(str, rules)))})"
  hits = [d for d in diagnostics if d.get("rule") == case.expect_rule]
  if not hits:
    return f"expected rule {case.expect_rule}, got {sorted(set(map(str, rules))) or 'no errors'}"
  if not any(d.get("node") == case.node for d in hits):
    return f"expected rule {case.expect_rule} at node {case.node}, got it at node(s) {sorted({str(d.get('node')) for d in hits})}"
  if case.only and len(set(rules)) > 1:
    return f"expected only rule {case.expect_rule}, also got {sorted(set(map(str, rules)) - {case.expect_rule})}"
  return None


def validate_case(case: RuleCase, tables=None) -> tuple[str | None, object]:
  """Run tinyspec's own validator on the case: (mismatch or None, ValidationResult)."""
  res = validate_file(case.input, case.level, tables)
  return check_result(case, res.exit_code, [d.to_json() for d in res.diagnostics]), res
