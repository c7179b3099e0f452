"""The rule corpus (conformance/rules): every case gives its expected answer, every rule id
of the tables has a valid and an invalid case, every op has a valid example, and the rule
ids the code can raise are exactly the catalogue's."""
from __future__ import annotations
import json
import re
import subprocess
import sys
from pathlib import Path
import pytest
import yaml
from tinyspec.tables import tables
from tinyspec.conformance.corpus.rulecases import load_rule_cases, cases_by_rule, validate_case, check_result, RULES_DIR, EXPECT_SUFFIX

ROOT = Path(__file__).resolve().parents[2]
CASES = load_rule_cases()
BY_RULE = cases_by_rule(CASES)
T = tables()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_gives_the_expected_answer(case):
  mismatch, res = validate_case(case)
  assert mismatch is None, f"{case.id}: {mismatch}\n" + "\n".join(d.format() for d in res.diagnostics[:5])
  assert "internal.error" not in res.rules()


@pytest.mark.parametrize("rule_id", sorted(T.rule_ids()))
def test_every_rule_has_a_valid_and_an_invalid_case(rule_id):
  got = BY_RULE.get(rule_id, {"valid": [], "invalid": []})
  assert got["invalid"], f"rule {rule_id} has no invalid case in conformance/rules/{rule_id}/ (add one to tools/gen_rule_cases.py)"
  assert got["valid"], f"rule {rule_id} has no valid case in conformance/rules/{rule_id}/ (add one to tools/gen_rule_cases.py)"
  assert all(c.expect_rule == rule_id for c in got["invalid"]), "an invalid case in a rule's folder must expect that rule"


def test_corpus_folders_are_rule_ids_or_ops():
  folders = {p.name for p in RULES_DIR.iterdir() if p.is_dir()} - {"ops"}
  assert folders <= T.rule_ids(), f"folders naming no rule id: {sorted(folders - T.rule_ids())}"
  assert {p.name for p in (RULES_DIR / "ops").iterdir()} == set(T.ops), "conformance/rules/ops/ must hold exactly the ops of the tables"


@pytest.mark.parametrize("op", sorted(T.ops))
def test_every_op_has_a_valid_example_case(op):
  cases = [c for c in CASES if c.op == op]
  assert cases and all(c.valid for c in cases), f"no valid example case for {op}"
  assert any(op in c.ops() for c in cases), f"the example case of {op} does not use {op}"


def _raised_rule_ids() -> set[str]:
  """Rule ids the code and the tables can raise: op checks, require() calls in the
  derived rules, RuleFail in the rule functions, and the validator's and loader's own."""
  ids = {c.rule for op in T.ops.values() for c in op.checks}
  derived = (ROOT / "spec" / "derived.yaml").read_text()
  ids |= set(re.findall(r"require\([^'\"]*['\"]([\w.]+)['\"]", derived))
  src = {p: (ROOT / "tinyspec" / p).read_text() for p in ("rules.py", "validate.py", "graph.py")}
  ids |= set(re.findall(r'RuleFail\("([\w.]+)"', src["rules.py"]))
  ids |= set(re.findall(r'report\([^,()]*, [^,()]*, "([\w.]+)"', src["validate.py"]))
  ids |= set(re.findall(r'\(\("([\w.]+)", f?"', src["validate.py"]))          # _slot_errors' (rule, message) pairs
  ids |= set(re.findall(r'Diagnostic\(\w+, [^,()]*, [^,()]*, "([\w.]+)"', src["graph.py"] + src["validate.py"]))
  # the file rules of any file tinyspec reads (tinyspec/files.py; its other refusals are io_rules)
  ids |= set(re.findall(r'FileRefused\([^,()]*, "(file\.[\w.]+)"', (ROOT / "tinyspec" / "files.py").read_text()))
  return ids


def test_rule_ids_in_code_and_catalogue_agree():
  raised = _raised_rule_ids()
  catalogue = set(T.rule_catalogue)
  assert "internal.error" in raised, "the regexes above no longer see the validator's report() calls"
  assert "internal.error" not in catalogue, "internal.error is a bug in the tables, never a rule a graph breaks"
  assert raised - {"internal.error"} - catalogue == set(), "rule ids raised but not in ops.yaml `rules:`"
  assert catalogue - raised == set(), "catalogue rule ids nothing raises"
  assert {c.rule for op in T.ops.values() for c in op.checks} <= catalogue


def test_expect_files_are_plain_data():
  """Readable without this package: plain JSON with the documented keys."""
  keys = {"rule", "op", "input", "description", "level", "expect"}
  for p in RULES_DIR.rglob("*" + EXPECT_SUFFIX):
    d = json.loads(p.read_text())
    assert set(d) <= keys and "input" in d and "expect" in d, p
    e = d["expect"]
    assert isinstance(e["valid"], bool) and e["exit"] in (0, 1, 2), p
    if not e["valid"]:
      assert {"rule", "node", "only"} <= set(e), p
      assert e["node"] is None or isinstance(e["node"], int), p
    if e["exit"] != 2:   # readable inputs are JSON (or YAML where YAML is the point)
      text = (p.parent / d["input"]).read_text()
      doc = json.loads(text) if d["input"].endswith(".json") else yaml.safe_load(text)
      assert isinstance(doc, (dict, list)) or d.get("rule") == "file.schema", p


def test_check_result_judges_other_validators():
  """The judge works on any validator's answer, not only tinyspec's."""
  case = next(c for c in CASES if c.id == "RESHAPE.numel/invalid-6-to-2x4")
  assert check_result(case, 1, [{"rule": "RESHAPE.numel", "node": case.node}]) is None
  assert "node" in check_result(case, 1, [{"rule": "RESHAPE.numel", "node": 0}])
  assert "expected rule" in check_result(case, 1, [{"rule": "shape.broadcast", "node": case.node}])
  assert "only" in check_result(case, 1, [{"rule": "RESHAPE.numel", "node": case.node}, {"rule": "dtype.match", "node": 1}])
  assert "exit" in check_result(case, 0, [])
  ok = next(c for c in CASES if c.valid)
  assert check_result(ok, 0, []) is None and check_result(ok, 1, [{"rule": "x", "node": 0}]) is not None


def test_generator_and_corpus_agree():
  """conformance/rules is what tools/gen_rule_cases.py writes (op examples included)."""
  r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_rule_cases.py"), "--check"], capture_output=True, text=True)
  assert r.returncode == 0, r.stdout + r.stderr
