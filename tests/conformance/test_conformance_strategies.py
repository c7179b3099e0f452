"""conformance/strategies.py (conformance/fuzz/graphs.py, mutations.py): the drawn graphs are valid, the mutants break their tagged
rule at their tagged node, an op added to the tables is drawn without a Python change,
and a failing case is cut down to the failing node and what it reads."""
from __future__ import annotations
import shutil
from pathlib import Path
import pytest
from hypothesis import given, settings, HealthCheck, find, assume
from tinyspec.tables import tables, Tables
from tinyspec.validate import validate
from tinyspec.dtypes import DTYPES
from tinyspec.conformance.strategies import graphs, invalid_graphs, drawable_ops, mutation_rules, hints

ROOT = Path(__file__).resolve().parents[2]
FAST = settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("level", ["tensor", "kernel"])
def test_drawn_graphs_are_valid_and_evaluate(level):
  from tinyspec.refimpl import evaluate
  seen = set()

  @FAST
  @given(graphs(level))
  def check(d):
    res = validate(d.graph)
    assert res.ok, [x.format() for x in res.diagnostics]
    assert res.level == level
    out = evaluate(d.graph, d.inputs)
    assert set(d.outputs) <= set(out)                           # every drawn op node is an output
    for _name, i in d.outputs.items(): seen.add(d.graph.nodes[i].op)
  check()
  assert len(seen) >= 5, seen


def test_drawable_ops_come_from_the_tables():
  T = tables()
  ops = drawable_ops("tensor")
  assert {"ADD", "RESHAPE", "PERMUTE", "REDUCE", "CAST"} <= set(ops)
  assert all("tensor" in T.ops[o].levels and not T.ops[o].untrusted for o in ops)
  assert not set(hints()["skip"]) & set(ops)
  kernel = drawable_ops("kernel")
  assert "RESHAPE" not in kernel and "ADD" in kernel          # movement ops are tensor-only in the tables


def test_shape_forms_hold_the_checks():
  # reshape/expand/pad/shrink targets are drawn to satisfy the op's check: no retries wasted
  @FAST
  @given(graphs("tensor", ops=["RESHAPE", "EXPAND", "PAD", "SHRINK", "PERMUTE", "FLIP"], max_ops=3))
  def check(d):
    assert validate(d.graph).ok
  check()


@settings(max_examples=60, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(invalid_graphs("tensor"))
def test_mutants_break_their_tagged_rule(m):
  res = validate(m.graph)
  hits = [(x.rule, x.node) for x in res.diagnostics]
  assert (m.rule, m.node) in hits, (m.how, m.rule, m.node, hits, m.graph.dumps())


@pytest.mark.parametrize("rule", sorted(mutation_rules()))
def test_every_mutation_of_the_table_applies(rule):
  @settings(max_examples=3, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
  @given(invalid_graphs("tensor", rules=[rule]))
  def check(m):
    assert m.rule == rule and (rule, m.node) in [(x.rule, x.node) for x in validate(m.graph).diagnostics]
  check()


def test_mutations_name_catalogue_rules():
  T = tables()
  assert set(hints()["mutations"]) <= T.rule_ids()          # a renamed rule id would leave a dead entry


@settings(max_examples=15, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(graphs("tensor", max_ops=6))
def test_minimal_keeps_only_the_node_and_what_it_reads(d):
  assume(len(d.outputs) >= 2)
  target = sorted(d.outputs.values())[0]
  m = d.minimal(target)
  assert validate(m.graph).ok
  assert len(m.graph.nodes) < len(d.graph.nodes)
  assert m.graph.nodes[max(m.outputs.values())].op == d.graph.nodes[target].op
  used = {f"buf{n.arg['slot']}" for n in m.graph.nodes if n.op == "BUFFER"}
  assert set(m.inputs) == used                               # dead inputs go too


@settings(max_examples=15, database=None, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(graphs("kernel", max_ops=5))
def test_kernel_minimal_stays_a_kernel(d):
  assume(len(d.outputs) >= 2)
  m = d.minimal(min(d.outputs.values()))
  res = validate(m.graph)
  assert res.ok and res.level == "kernel" and len(m.outputs) == 1


# -- a new op, written only in a temporary copy of ops.yaml, is drawn and mutated
NEW_OP = """\
  HYPOT2:
    family: binary
    src: [{name: A, kind: value, dtype: float}, {name: B, kind: value, dtype: {same: A}}]
    semantics: "a*a + b*b (an op that exists only in a temporary table)."
    example: [{op: CONST, arg: {value: 3.0, dtype: float32}}, {op: CONST, arg: {value: 4.0, dtype: float32}}, {op: HYPOT2, src: [0, 1]}]
"""


@pytest.fixture(scope="module")
def hypot(tmp_path_factory):
  d = tmp_path_factory.mktemp("hypot2")
  text = (ROOT / "spec" / "ops.yaml").read_text()
  (d / "ops.yaml").write_text(text.replace("\nops:\n", "\nops:\n" + NEW_OP, 1))
  shutil.copy(ROOT / "spec" / "derived.yaml", d / "derived.yaml")
  return Tables(ops_path=d / "ops.yaml", derived_path=d / "derived.yaml")


def test_a_new_op_is_drawn_from_the_tables_alone(hypot):
  assert "HYPOT2" in drawable_ops("tensor", hypot) and "HYPOT2" in drawable_ops("kernel", hypot)
  for level in ("tensor", "kernel"):
    d = find(graphs(level, tables=hypot, ops=["HYPOT2", "ADD"]), lambda d: any(n.op == "HYPOT2" for n in d.graph.nodes),
             settings=settings(database=None, deadline=None, derandomize=True, max_examples=300))
    assert validate(d.graph, tables=hypot).ok
    assert not validate(d.graph).ok                          # the shipped tables do not know it
    h = [n for n in d.graph.nodes if n.op == "HYPOT2"][0]
  assert all(DTYPES[validate(d.graph, tables=hypot).views[j].dtype].cls == "float" for j in h.src)   # its slots allow the float class


def test_a_new_op_is_mutated_by_rule(hypot):
  m = find(invalid_graphs("tensor", rules=["dtype.allowed"], tables=hypot),
           lambda m: m.graph.nodes[m.node].op == "HYPOT2", settings=settings(database=None, deadline=None, derandomize=True, max_examples=2000,
                                                                            suppress_health_check=list(HealthCheck)))
  assert ("dtype.allowed", m.node) in [(x.rule, x.node) for x in validate(m.graph, tables=hypot).diagnostics]


def test_index_is_drawn_with_out_of_range_indices_and_the_c_backend_agrees():
  """INDEX (gathers with data-dependent indices, decision index-oob) is drawn like any op:
  some draws index out of range, and the C backend matches the reference on them."""
  from tinyspec.conformance.fuzz.checks import check_example
  from tinyspec.conformance.fuzz.runners import InProcess
  runner = InProcess("c")
  seen = {"index": 0, "outside": 0}

  @settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))
  @given(graphs("tensor", ops=["INDEX"], max_ops=2))
  def check(d):
    g = d.graph
    res = validate(g)
    for _i, n in enumerate(g.nodes):
      if n.op != "INDEX": continue
      seen["index"] += 1
      src_shape = res.views[n.src[0]].shape
      for axis, j in enumerate(n.src[1:]):
        lo, hi = res.views[j].min_max
        if lo < 0 or hi >= src_shape[axis]: seen["outside"] += 1
    f = check_example(d, runner)
    assert f is None, str(f)
  check()
  assert seen["index"] >= 20 and seen["outside"] >= 5, seen


def test_the_readme_strategies_example_runs_as_written():
  """conformance/README.md's Python example imports the public path and its tests pass."""
  import re
  readme = Path(__file__).resolve().parents[2] / "conformance" / "README.md"
  blocks = re.findall(r"^```python\n(.*?)^```", readme.read_text(), re.S | re.M)
  scope: dict = {"__name__": "readme"}
  for code in blocks: exec(compile(code, str(readme), "exec"), scope)   # noqa: S102 -- our own README
  tests = [f for name, f in scope.items() if name.startswith("test_") and callable(f)]
  assert len(tests) == 2
  for t in tests: t()

