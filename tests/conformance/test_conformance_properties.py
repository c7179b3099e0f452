"""conformance/fuzz/ (checks.py, driver.py): the reference passes its own properties; a wrong value is
reported at the first node that differs (not at the nodes that read it); a planted
renderer bug (IDIV truncating instead of flooring) is found by fuzzing and shrunk to a
graph of at most 4 nodes; failures are written as corpus cases that the runner replays."""
from __future__ import annotations
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck
from tinyspec.refimpl.backend import RefBackend
from tinyspec.compiler.backend import CBackend
from tinyspec.conformance.strategies import graphs
from tinyspec.conformance.fuzz.checks import check_example, check_values
from tinyspec.conformance.fuzz.runners import InProcess
from tinyspec.conformance.fuzz.driver import fuzz

FAST = settings(max_examples=25, deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("level", ["tensor", "kernel"])
def test_the_reference_passes_its_own_properties(level):
  runner = InProcess("ref")

  @FAST
  @given(graphs(level))
  def check(d):
    f = check_example(d, runner)
    assert f is None, str(f)
  check()


class _WrongMul(RefBackend):
  """The reference evaluator with a wrong MUL: every integer MUL gives a*b + 1, and the
  nodes that read it compute with that value."""
  name = "wrong-mul"
  def run(self, graph, inputs):
    from tinyspec.refimpl import evaluate
    from tinyspec.graph import Graph, Node
    from tinyspec.validate import validate
    views = validate(graph).views
    nodes, new = [], {}
    for i, n in enumerate(graph.nodes):
      nodes.append(Node(n.op, [new[j] for j in n.src], n.arg))
      if n.op == "MUL":
        nodes.append(Node("CONST", [], {"value": 1, "dtype": views[i].dtype}))
        nodes.append(Node("ADD", [len(nodes) - 2, len(nodes) - 1]))
      new[i] = len(nodes) - 1
    return evaluate(Graph(nodes, [new[r] for r in graph.root_indices]), inputs)


def _chain():
  """NEG(ADD(MUL(a, b), a)) on int32 buffers, every op node an output."""
  from tinyspec.refimpl.build import Builder
  from tinyspec.conformance.strategies import Drawn
  b = Builder()
  x, y = b.buffer((3,), "int32", 0), b.buffer((3,), "int32", 1)
  m = b.MUL(x, y); s = b.ADD(m, x); n = b.NEG(s)
  ins = {"buf0": np.array([1, -2, 3], np.int32), "buf1": np.array([4, 5, -6], np.int32)}
  return Drawn(b.graph(roots=[m, s, n]), ins, "tensor", {"out0": m, "out1": s, "out2": n}, {x: ins["buf0"], y: ins["buf1"]})


def test_a_wrong_value_is_reported_at_the_first_node_that_differs():
  # the MUL is wrong, and so (through it) are the ADD and the NEG: the MUL is named
  d = _chain()
  got = _WrongMul().run(d.graph, d.inputs)
  assert all(np.any(got[k] != v) for k, v in RefBackend().run(d.graph, d.inputs).items())   # every output differs end to end
  f = check_values(d, got, decomposed=False)
  assert f is not None and (f.op, f.node) == ("MUL", d.outputs["out0"]) and "3 of 3 elements differ" in f.message
  assert len(f.case().graph.nodes) == 4                                   # VCONST, two BUFFERs, MUL


def test_a_node_is_checked_against_its_own_inputs():
  # a backend whose MUL is right but whose ADD reads a wrong MUL value would be wrong; here
  # the ADD and NEG are right *for the MUL value they were given*: only the MUL fails
  d = _chain()
  got = _WrongMul().run(d.graph, d.inputs)
  ok = dict(got); ok["out0"] = RefBackend().run(d.graph, d.inputs)["out0"]
  f = check_values(d, ok, decomposed=False)
  assert f is not None and f.op == "ADD"                                  # ADD(right MUL) is not what it returned


def _truncating_idiv(monkeypatch):
  """Plant a bug in the C renderer's table: IDIV rounds toward zero (C's /) instead of
  down (decision idiv-mod)."""
  from tinyspec.compiler.rendertables import render_tables
  R = render_tables()
  src = R["helpers"]["idiv"]
  planted = "\n".join(line for line in src.splitlines() if "q - 1" not in line) + "\n"
  assert planted != src, "the idiv helper changed: update the planted bug"
  monkeypatch.setitem(R["helpers"], "idiv", planted)


def test_a_planted_renderer_bug_is_found_and_shrunk(monkeypatch):
  _truncating_idiv(monkeypatch)
  strategy = graphs("tensor", ops=["IDIV", "ADD"], dtypes=["int8", "int32"], max_ops=3)
  rep = fuzz(CBackend(), examples=60, seed=1, isolate=False, stages=False, strategy=strategy)
  assert rep.failures, "the planted IDIV bug was not found"
  f = rep.failures[0]
  assert f.prop == "values" and f.op == "IDIV", str(f)
  case = f.case()
  assert len(case.graph.nodes) <= 4, case.graph.dumps()
  assert case.graph.nodes[-1].op == "IDIV"


def test_the_unplanted_renderer_passes_the_same_search():
  strategy = graphs("tensor", ops=["IDIV", "ADD"], dtypes=["int8", "int32"], max_ops=3)
  rep = fuzz(CBackend(), examples=30, seed=1, isolate=False, stages=False, strategy=strategy)
  assert not rep.failures, [str(f) for f in rep.failures]


def test_failures_are_written_as_corpus_cases_and_replayed(tmp_path, capsys):
  from tinyspec.conformance.corpus.cases import load_cases
  from tinyspec.cli import main
  rep = fuzz(_WrongMul(), examples=40, seed=3, isolate=False, stages=False, out=tmp_path,
             strategy=graphs("tensor", ops=["MUL"], dtypes=["int16"], max_ops=2))
  assert rep.failures and rep.written
  cases = load_cases(tmp_path)
  assert [c.covers for c in cases] == [[("MUL", "int16")]]
  # the case replays: the reference passes it, the wrong backend fails it
  assert main(["conformance", "--backend", "ref", "--cases", str(tmp_path)]) == 0
  out = capsys.readouterr().out
  assert out.strip().splitlines()[-1] == "1 passed, 0 failed"


def test_fuzz_command(capsys, tmp_path):
  from tinyspec.cli import main
  rc = main(["fuzz", "--backend", "ref", "--examples", "15", "--seed", "2", "--out", str(tmp_path / "f"), "--level", "tensor"])
  out = capsys.readouterr().out
  assert rc == 0, out
  assert out.strip().splitlines()[-1].startswith("15 examples, 0 failures")
  assert not (tmp_path / "f").exists()
  assert main(["fuzz", "--backend", "no-such-backend", "--examples", "1"]) == 2


def test_failures_that_cannot_be_written_are_reported(tmp_path):
  """An --out that cannot be made: the failures are still found and reported, each unwritten
  one a FileRefused (path.write) the command prints (exit 2), not an OSError out of fuzz."""
  rep = fuzz(_WrongMul(), examples=40, seed=3, isolate=False, stages=False, out="/proc/nope",
             strategy=graphs("tensor", ops=["MUL"], dtypes=["int16"], max_ops=2))
  assert rep.failures and not rep.written and rep.unwritten
  assert all(e.rule == "path.write" for e in rep.unwritten)


def test_the_fuzz_command_exits_2_when_a_failure_cannot_be_written(monkeypatch, capsys):
  from tinyspec.cli import main
  from tinyspec.conformance.fuzz import driver, graphunits
  from tinyspec.files import FileRefused
  def found_but_unwritten(*a, **kw):
    rep = driver.FuzzReport("ref", examples=3, failures=["f"], unwritten=[FileRefused("/proc/nope", "path.write", "cannot create the directory")])
    rep.lost, rep.missing, rep.resumed = None, [], 0
    return rep
  monkeypatch.setattr(graphunits, "fuzz_units", found_but_unwritten)
  assert main(["fuzz", "--backend", "ref", "--examples", "3", "--out", "/proc/nope"]) == 2
  assert "/proc/nope: cannot create the directory [path.write]" in capsys.readouterr().err
