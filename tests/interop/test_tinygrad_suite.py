"""The plugin that captures tinygrad's own tests (interop/suite, docs/tinygrad-suite.md),
run on a small tinygrad-style test file (tinygrad_suite_sample/) in a child pytest: every
realize captured under its test id and checked, each failure classified by the table's
rules (by signature, by test id) or left unclassified and counted, the summary line; the
report's exit status; a tinygrad that is not the pinned release refused; the table's
errors; a graph over its time limit stopped. No tinygrad checkout is needed (CI has no
network). Skipped without tinygrad.
"""
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinyspec.interop.suite.classify import TableError, classify, load_rules   # noqa: E402
from tinyspec.interop.suite.check import _verdict   # noqa: E402

SAMPLE = Path(__file__).resolve().parent / "tinygrad_suite_sample" / "tinygrad_style_tests.py"
PLANTED = """
version: 1
rules:
  - id: nan-times-zero
    class: tinygrad-bug
    ref: mul-zero-fold
    stage: agree
    level: tensor
    test: "*::test_nan_times_0"
    signature: "mismatch: out0: .*reference np.float32\\\\(nan\\\\), tinygrad np.float32\\\\(0.0\\\\)"
    reason: tinygrad rewrites x*0 to 0, the reference gives NaN for NaN and inf
"""
BY_TEST_ID = PLANTED + """
  - id: shifted
    class: capture-limitation
    ref: the sample
    test: ["*::test_shifted"]
    reason: classified by its test id alone
  - id: fails-as-written
    class: capture-limitation
    ref: the sample
    stage: test
    signature: "Lists differ"
    reason: a failed test is classified only by a rule that asks for stage test
"""


def _env():
  return {**os.environ, "DEV": "PYTHON", "PYTHONPATH": ""}   # the PYTHON device: no C compiler needed


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """The sample run once under the plugin: (its folder, the child's output, its exit status)."""
  d = tmp_path_factory.mktemp("suite")
  shutil.copy(SAMPLE, d / SAMPLE.name)
  (d / "pytest.ini").write_text("[pytest]\n")
  (d / "planted.yaml").write_text(PLANTED)
  p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tinyspec.interop.suite.plugin", "-p", "no:cacheprovider",
                      "-p", "no:xdist", "--tinygrad-suite-out", str(d / "out"), "--tinygrad-suite-classes", str(d / "planted.yaml"),
                      "--tinygrad-suite-keep", "-q", SAMPLE.name], cwd=d, env=_env(), capture_output=True, text=True, timeout=300)
  return d, p.stdout + p.stderr, p.returncode


def _records(d):
  return [json.loads(line) for f in sorted((d / "out").glob("records-*.jsonl")) for line in f.read_text().splitlines()]


def test_every_realize_is_captured_under_its_test_id(run):
  d, out, rc = run
  assert rc == 1, out   # test_fails fails, as written
  recs = _records(d)
  tests = {r["test"].split("::")[-1]: r for r in recs if r["kind"] == "test"}
  assert tests["test_agree"]["schedules"] == 2 and tests["test_no_realize"]["schedules"] == 0
  assert tests["test_fails"]["outcome"] == "failed" and tests["test_fails"]["schedules"] == 1
  assert not tests["test_skipped"]["ran"]
  scheds = [r for r in recs if r["kind"] == "schedule"]
  assert len(scheds) == 5
  for s in scheds:
    levels = sorted(g["level"] for g in s["graphs"])
    assert levels[-1] == "tensor" and levels.count("kernel") == levels.count("program") == s["calls"].get("SINK", 0) >= 1
  agree = [s for s in scheds if s["test"].endswith("test_agree")]
  assert all(g["stage"] == "ok" for s in agree for g in s["graphs"])


def test_failures_are_classified_or_counted_unclassified(run):
  d, out, _ = run
  recs = _records(d)
  bad = {(r["test"].split("::")[-1], g["level"], g["stage"]) for r in recs if r["kind"] == "schedule" for g in r["graphs"] if g["stage"] != "ok"}
  assert bad == {("test_nan_times_0", "tensor", "agree"), ("test_shifted", "tensor", "agree")}
  shown = [g.get("diagnoses") for r in recs if r["kind"] == "schedule" for g in r["graphs"] if g["stage"] != "ok"]
  # tinygrad's x*0 -> 0 redone on the graph gives tinygrad's values; the lowered programs that ran agree
  assert shown == [["mul-zero-fold", "program-agrees"]] * 2
  lines = out.splitlines()
  assert any(line.strip().startswith("1  tinygrad-bug") and "nan-times-zero" in line for line in lines), out
  assert any(line.strip().startswith("1  UNCLASSIFIED") for line in lines), out
  assert "tinygrad suite: 5 schedules from 5 tests; imported 100.0%, valid 100.0%, agree 60.0%, unclassified 1" in out
  kept = d / "out" / "failing"
  assert {p.name for p in kept.iterdir()} == {"tinygrad_style_tests.py_TestSample_test_nan_times_0", "tinygrad_style_tests.py_TestSample_test_shifted"}
  assert list(kept.glob("*/r0.tensor.json")) and list(kept.glob("*/r0.tensor.out0.npy"))


@pytest.mark.parametrize("table,status,unclassified", [(PLANTED, 1, 1), (BY_TEST_ID, 0, 0)])
def test_report_lists_every_failure_and_ends_with_the_line(run, tmp_path, table, status, unclassified):
  d, _, _ = run
  (tmp_path / "t.yaml").write_text(table)
  p = subprocess.run([sys.executable, "-m", "tinyspec.interop.suite", "report", str(d / "out"), "--classes", str(tmp_path / "t.yaml"),
                      "--json", str(tmp_path / "s.json")], capture_output=True, text=True, timeout=120)
  assert p.returncode == status, p.stdout + p.stderr
  lines = p.stdout.splitlines()
  assert lines[-1] == f"tinygrad suite: 5 schedules from 5 tests; imported 100.0%, valid 100.0%, agree 60.0%, unclassified {unclassified}"
  who = "capture-limitation [fails-as-written: the sample]" if table == BY_TEST_ID else "UNCLASSIFIED"
  assert f"  {who} tinygrad_style_tests.py::TestSample::test_fails: AssertionError: Lists differ: [2, 3] != [0, 0]" in lines
  listed = [line for line in lines if "::TestSample::" in line and "test_fails" not in line]
  assert len(listed) == 2 and any(line.startswith("tinygrad-bug [nan-times-zero: mul-zero-fold]") for line in listed)
  assert json.loads((tmp_path / "s.json").read_text())["unclassified"] == unclassified


def test_rediagnose_shows_again_from_the_kept_graphs(run, tmp_path):
  """Records written before a diagnosis existed are classified by it from the kept graphs."""
  d, _, _ = run
  shutil.copytree(d / "out" / "failing", tmp_path / "failing")
  lines = [json.loads(x) for x in (d / "out" / "records-main.jsonl").read_text().splitlines()]
  for rec in lines:
    for g in rec.get("graphs", ()): g.pop("diagnoses", None)
  (tmp_path / "records-main.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
  table = PLANTED.replace('signature: "mismatch', 'diagnosis: mul-zero-fold\n    signature: "mismatch')
  (tmp_path / "t.yaml").write_text(table)
  cmd = [sys.executable, "-m", "tinyspec.interop.suite", "report", str(tmp_path), "--classes", str(tmp_path / "t.yaml")]
  before = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
  after = subprocess.run(cmd + ["--rediagnose"], capture_output=True, text=True, timeout=120).stdout
  assert "unclassified 2" in before.splitlines()[-1] and "unclassified 1" in after.splitlines()[-1], (before, after)
  assert "judged again: 2 kept graphs" in after and "(shown: mul-zero-fold, program-agrees)" in after


def test_report_without_records_exits_2(tmp_path):
  p = subprocess.run([sys.executable, "-m", "tinyspec.interop.suite", "report", str(tmp_path)], capture_output=True, text=True, timeout=120)
  assert p.returncode == 2 and "no records" in p.stderr and "Traceback" not in p.stderr


def test_a_tinygrad_that_is_not_the_pinned_release_is_refused(tmp_path):
  """A checkout's tinygrad/ first on sys.path (pytest run from the checkout) is refused."""
  (tmp_path / "tinygrad").mkdir()
  (tmp_path / "tinygrad" / "__init__.py").write_text("")
  (tmp_path / "test_x.py").write_text("def test_x(): pass\n")
  p = subprocess.run([sys.executable, "-m", "pytest", "-p", "tinyspec.interop.suite.plugin", "-p", "no:cacheprovider",
                      "--tinygrad-suite-out", str(tmp_path / "out"), "test_x.py"], cwd=tmp_path, env=_env(),
                     capture_output=True, text=True, timeout=120)
  assert p.returncode == 4 and f"tinygrad is imported from {tmp_path / 'tinygrad'}" in p.stderr, p.stdout + p.stderr


@pytest.mark.parametrize("rules,message", [
  ("- {id: a, class: wrong, ref: r, reason: x, test: '*'}", "class 'wrong' is not one of"),
  ("- {id: a, class: tinygrad-bug, ref: r, reason: x}", "give `test`"),
  ("- {id: a, class: tinygrad-bug, ref: r, reason: x, signature: '('}", "not a regular expression"),
  ("- {id: a, class: tinygrad-bug, ref: r, test: '*'}", "`reason` (text) is required"),
  ("- {id: a, class: tinygrad-bug, ref: r, reason: x, test: '*', stage: parse}", "stage must be among"),
  ("- {id: a, class: tinygrad-bug, ref: r, reason: x, test: '*', colour: red}", "unknown keys ['colour']"),
  ("- {id: a, class: tinygrad-bug, ref: r, reason: x, test: '*'}\n- {id: a, class: tinygrad-bug, ref: r, reason: x, test: '*'}", "used twice"),
])
def test_a_bad_table_is_refused_with_the_rule_named(tmp_path, rules, message):
  (tmp_path / "t.yaml").write_text("version: 1\nrules:\n" + "\n".join("  " + r for r in rules.splitlines()) + "\n")
  with pytest.raises(TableError) as e: load_rules(tmp_path / "t.yaml")
  assert message in str(e.value) and "rule a" in str(e.value)


def test_the_shipped_table_loads_and_every_rule_has_a_reason():
  rules = load_rules()
  assert all(r.reason and r.ref for r in rules)
  assert classify(rules, "x::y", "tensor", "agree", "no rule matches this text \x00") is None


def test_every_tinygrad_class_is_an_entry_of_its_section_of_the_ledger():
  import re
  ledger = (Path(__file__).resolve().parents[2] / "docs" / "tinygrad-bugs.md").read_text()
  sections = re.split(r"^## ", ledger, flags=re.M)
  entries = {s[:3]: set(re.findall(r"^### ([a-z0-9-]+)", s, re.M)) for s in sections}   # "(a)", "(b)", "(c)"
  for kind, section in (("tinygrad-bug", "(a)"), ("tinygrad-divergence", "(b)")):
    rules = [r for r in load_rules() if r.kind == kind]
    assert rules and all(r.ref in entries[section] for r in rules), (kind, [r.ref for r in rules if r.ref not in entries[section]])


def test_a_graph_past_its_time_limit_is_stopped():
  def slow():
    t = time.monotonic()
    while time.monotonic() - t < 30: pass
  t0 = time.monotonic()
  verdict, g = _verdict("r0.tensor", "tensor", slow, 0.3)
  assert verdict["stage"] == "time" and g is None and time.monotonic() - t0 < 5


# ------------------------------------------------------------------ diagnoses
def _graph(nodes):
  from tinyspec.graph import load_text
  g, diags = load_text(json.dumps({"format": "tinyspec-graph", "version": 1, "level": "tensor", "nodes": nodes}))
  assert g is not None, diags
  return g


def _sum3(shared: bool):
  """buf0 + (buf1 + buf2); shared: the inner sum is also an output (two uses: C names it)."""
  buf = [{"op": "BUFFER", "src": [0], "arg": {"slot": k, "dtype": "float32", "device": "CPU"}} for k in range(3)]
  nodes = [{"op": "VCONST", "arg": {"values": [1], "dtype": "index"}}, *buf, {"op": "ADD", "src": [2, 3]}, {"op": "ADD", "src": [1, 4]}]
  if shared: nodes.append({"op": "SINK", "src": [5, 4]})
  return _graph(nodes)


def _diagnosed(g, level, inputs, want):
  from types import SimpleNamespace
  from tinyspec.interop.suite.diagnose import diagnose
  return diagnose(SimpleNamespace(level=level, graph=g, inputs=inputs, expected={"out0": np.array(want, np.float32)}))[0]


ONE_TINY_TINY = {"buf0": np.array([1.0], np.float32), "buf1": np.array([5e-8], np.float32), "buf2": np.array([5e-8], np.float32)}


def test_c_association_is_confirmed_only_by_the_value_c_computes():
  g = _sum3(shared=False)
  assert _diagnosed(g, "program", ONE_TINY_TINY, [1.0]) == ["c-association"]          # (1 + 5e-8) + 5e-8, as C reads a+b+c
  assert _diagnosed(g, "program", ONE_TINY_TINY, [1.0000001]) == []                    # the graph's own order: nothing shown
  assert _diagnosed(g, "program", ONE_TINY_TINY, [1.0000002]) == []                    # another cause: nothing shown
  assert _diagnosed(g, "kernel", ONE_TINY_TINY, [1.0]) == []                           # renderer's text: program level only


def test_c_association_leaves_a_named_operand_alone():
  from tinyspec.interop.suite.diagnose import c_association
  assert c_association(_sum3(shared=True), ["index"] + ["float32"] * 6) is None      # two uses: C gives it a variable, its parentheses stay


def test_cast_pair_fold_is_confirmed_only_by_the_unrounded_value():
  nodes = [{"op": "VCONST", "arg": {"values": [1], "dtype": "index"}},
           {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
           {"op": "CAST", "src": [1], "arg": "float16"}, {"op": "CAST", "src": [2], "arg": "float32"}]
  g, x = _graph(nodes), {"buf0": np.array([3.71262], np.float32)}
  assert _diagnosed(g, "kernel", x, [3.71262]) == ["cast-pair-fold"]
  assert _diagnosed(g, "kernel", x, [3.7109375]) == []    # rounded through float16 as written: the reference's own value


def test_bad_options_are_usage_errors_before_any_test(tmp_path):
  (tmp_path / "test_x.py").write_text("def test_x(): pass\n")
  (tmp_path / "t.yaml").write_text("version: 1\nrules:\n  - {id: a, class: nonsense, ref: r, reason: x, test: '*'}\n")
  base = [sys.executable, "-m", "pytest", "-p", "tinyspec.interop.suite.plugin", "-p", "no:cacheprovider", "test_x.py"]
  for extra, message in ((["--tinygrad-suite-out", "o", "--tinygrad-suite-levels", "tensor,bogus"], "--tinygrad-suite-levels takes some of"),
                         ([], "--tinygrad-suite-out DIR is required"),
                         (["--tinygrad-suite-out", "o", "--tinygrad-suite-classes", "t.yaml"], "rule a: class 'nonsense'")):
    p = subprocess.run(base + extra, cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 4 and message in p.stderr and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "test_x.py ." not in p.stdout and " passed" not in p.stdout


def test_recip_cancellation_is_confirmed_only_by_the_cancelled_value():
  nodes = [{"op": "VCONST", "arg": {"values": [1], "dtype": "index"}},
           {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
           {"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}, {"op": "RESHAPE", "src": [2, 0]},
           {"op": "ADD", "src": [3, 1]}, {"op": "RECIP", "src": [4]}, {"op": "MUL", "src": [5, 1]}]   # x * 1/(1+x), as written
  x = np.array([1e-4], np.float32)
  cancelled = np.float32(1) - np.float32(1) / (np.float32(1) + x)                                   # tinygrad's 1 - 1/(1+x)
  assert _diagnosed(_graph(nodes), "tensor", {"buf0": x}, cancelled) == ["recip-cancellation"]
  assert _diagnosed(_graph(nodes), "tensor", {"buf0": x}, 2 * x) == []    # far outside RECIP's 3 ulp at 1: another cause


def test_program_agrees_is_evidence_only_where_the_lowered_program_agrees(tmp_path):
  from tinyspec.interop.suite.check import add_evidence
  def rec(program_stage):
    return {"graphs": [{"name": "r0.k1.kernel", "level": "kernel", "stage": "agree", "error": "mismatch: param0: ...", "ops": ["SIN", "STORE"]},
                       {"name": "r0.k1.program", "level": "program", "stage": program_stage, "error": ""}]}
  agreed, also_wrong = rec("ok"), rec("agree")
  add_evidence(agreed), add_evidence(also_wrong)
  assert agreed["graphs"][0]["diagnoses"] == ["program-agrees"] and "diagnoses" not in also_wrong["graphs"][0]
  (tmp_path / "t.yaml").write_text("version: 1\nrules:\n  - {id: s, class: tinygrad-bug, ref: sin-accuracy, reason: x, diagnosis: program-agrees, ops: [SIN]}\n")
  rules = load_rules(tmp_path / "t.yaml")
  assert classify(rules, "t", "kernel", "agree", "mismatch", ["program-agrees"], ["SIN", "STORE"]).id == "s"
  assert classify(rules, "t", "kernel", "agree", "mismatch", ["program-agrees"], ["EXP2", "STORE"]) is None
  assert classify(rules, "t", "kernel", "agree", "mismatch", [], ["SIN", "STORE"]) is None
  tensor = {"graphs": [{"name": "r0.tensor", "level": "tensor", "stage": "agree", "error": "mismatch: out0"}, *agreed["graphs"][1:]]}
  add_evidence(tensor)   # every program of the schedule agrees: the tensor graph's difference is the lowering's
  assert tensor["graphs"][0]["diagnoses"] == ["program-agrees"]
  (tmp_path / "p.yaml").write_text("version: 1\nrules:\n  - {id: p, class: tinygrad-bug, ref: r, reason: x, diagnosis: program-agrees, pattern: recip-cancellation}\n")
  rules = load_rules(tmp_path / "p.yaml")
  assert classify(rules, "t", "tensor", "agree", "m", ["program-agrees"], (), ["recip-cancellation"]).id == "p"
  assert classify(rules, "t", "tensor", "agree", "m", ["program-agrees"], (), ["mul-zero-fold"]) is None


def test_program_reassociated_is_evidence_only_where_c_reassociation_explains_the_program():
  from tinyspec.interop.suite.check import add_evidence
  def rec(program_stage, program_diagnoses):
    return {"graphs": [{"name": "r0.k1.kernel", "level": "kernel", "stage": "agree", "error": "mismatch: param0: ..."},
                       {"name": "r0.k1.program", "level": "program", "stage": program_stage, "error": "mismatch: param0",
                        "diagnoses": program_diagnoses}]}
  explained, other, unexplained = rec("agree", ["c-association"]), rec("agree", ["mul-zero-fold"]), rec("agree", [])
  for r in (explained, other, unexplained): add_evidence(r)
  assert explained["graphs"][0]["diagnoses"] == ["program-reassociated"]
  assert "diagnoses" not in other["graphs"][0] and "diagnoses" not in unexplained["graphs"][0]
  rules = load_rules()
  hit = classify(rules, "t", "kernel", "agree", "mismatch", ["program-reassociated"], ["SIN", "STORE"])
  assert hit.kind == "tinygrad-bug" and hit.ref == "c-renderer-reassociates"


def test_an_integer_from_an_inexact_float_is_not_judged_where_its_bound_is_inf():
  """compare(): an int output (e.g. the BITCAST of a float computed with SIN) whose bound is inf
  is counted as unbounded; where the bound is 0 it is still compared exactly."""
  from tinyspec.interop.compare import compare
  want, got = np.array([7, -1108270581, 3], np.int32), np.array([7, -1108270579, 4], np.int32)
  c = compare(want, got, np.array([0.0, np.inf, 0.0]))
  assert not c.ok and c.unbounded == 1 and "1 of 3 elements differ; first at (2,)" in c.message
  assert compare(want, got, np.array([0.0, np.inf, np.inf])).ok
  assert not compare(want, got, None).ok     # no bound: exact everywhere


def test_recheck_judges_kept_graphs_again(run, tmp_path):
  """A kept graph judged again with the code of now: here tinygrad's kept value is replaced by the
  reference's (as a fix would make them meet), and --recheck counts the schedule as agreeing."""
  d, _, _ = run
  shutil.copytree(d / "out" / "failing", tmp_path / "failing")
  shutil.copy(d / "out" / "records-main.jsonl", tmp_path / "records-main.jsonl")
  (kept,) = (tmp_path / "failing").glob("*test_shifted")
  np.save(kept / "r0.tensor.out0.npy", np.array([np.nan, 0.0], np.float32))   # NaN*0, 2*0 as IEEE says
  (tmp_path / "t.yaml").write_text(PLANTED)
  cmd = [sys.executable, "-m", "tinyspec.interop.suite", "report", str(tmp_path), "--classes", str(tmp_path / "t.yaml")]
  p = subprocess.run(cmd + ["--recheck"], capture_output=True, text=True, timeout=120)
  assert p.returncode == 0 and "judged again: 2 kept graphs" in p.stdout, p.stdout + p.stderr
  assert p.stdout.splitlines()[-1].endswith("agree 80.0%, unclassified 0")
