"""The first divergent node of a failing case (issue 16): found by running the graph cut at
candidate nodes, bisecting over their topological order, in about log2(nodes) backend runs;
named in the console, --json, JUnit and the HTML report (and marked in its picture). The
op x dtype matrix is coloured by result and profile."""
from __future__ import annotations
import json
import re
import numpy as np
from tinyspec.cli import main
from tinyspec.conformance.corpus.cases import write_case, load_cases
from tinyspec.conformance.run.divergence import first_divergent
from tinyspec.conformance.run import htmlreport
from tinyspec.conformance.run.runner import Result
from tinyspec.graph import load_file
from tinyspec.refimpl import evaluate
from tinyspec.refimpl.build import Builder
from test_repro import _broken_backend


def _chain_case(root, n_neg: int = 0):
  """buf0*buf1 (agrees) -> +buf1 (the broken backend's ADD diverges here) -> n_neg NEGs -> *buf0."""
  b = Builder()
  x, y = b.buffer((6,), "float32", 0), b.buffer((6,), "float32", 1)
  v = b.add("ADD", b.add("MUL", x, y), y)
  for _ in range(n_neg): v = b.add("NEG", v)
  b.add("MUL", v, x)
  g = b.graph()
  ins = {"buf0": np.arange(1, 7, dtype=np.float32), "buf1": np.full(6, 2, np.float32)}
  want = evaluate(g, ins)["out0"]
  meta = {"id": "CHAIN/float32", "kind": "positive", "level": "tensor", "ops": ["ADD", "BUFFER", "MUL", "NEG", "VCONST"],
          "covers": [["ADD", "float32"]], "dtypes": ["float32", "index"], "devices": ["CPU"], "description": "a chain"}
  write_case(root / "CHAIN" / "float32", meta, g.dumps(), {k: (a, "float32") for k, a in ins.items()}, {"out0": (want, "float32", 0, 0)})
  add = next(i for i, nd in enumerate(g.nodes) if nd.op == "ADD")
  return load_cases(root)[0], add


def _ref_with_bad_add(graph_file, inputs):
  """A backend as a function: the reference, except ADD computes a - b."""
  from tinyspec.conformance.corpus.cases import load_array
  g, _ = load_file(graph_file)
  ins = {k: load_array(p, dt) for k, (p, dt) in inputs.items()}
  vals = evaluate(g, ins, trace=True).values
  bad = {i for i, nd in enumerate(g.nodes) if nd.op == "ADD"}
  if not bad: return {"out0": vals[len(g.nodes) - 1]}
  # recompute: every node at or after the first ADD is off by the ADD's error (enough for a search)
  return {"out0": vals[len(g.nodes) - 1] + (1.0 if len(g.nodes) - 1 >= min(bad) else 0.0)}


def test_the_search_finds_the_first_divergent_node_in_log_runs(tmp_path):
  case, add = _chain_case(tmp_path, n_neg=200)
  d = first_divergent(case, _ref_with_bad_add, message="out0: 6 of 6 elements differ")
  assert (d.node, d.op, d.sources_agree) == (add, "ADD", True)
  assert d.runs <= 11            # 203 candidates: about log2(203) = 8 runs, plus its source
  assert "first divergent node: %d ADD float32 (6,)" % add in d.line()


def test_the_search_is_bounded(tmp_path):
  case, add = _chain_case(tmp_path, n_neg=200)
  d = first_divergent(case, _ref_with_bad_add, max_runs=3)
  assert d.runs <= 4 and d.node is not None and d.node > add and "stopped early" in d.note


def test_a_failure_names_its_first_divergent_node_everywhere(tmp_path, capsys):
  case, add = _chain_case(tmp_path / "cases", n_neg=2)
  backend = _broken_backend(tmp_path)
  rc = main(["conformance", "--backend", backend, "--cases", str(tmp_path / "cases"), "--json", str(tmp_path / "r.json"),
             "--junit", str(tmp_path / "r.xml"), "--html", str(tmp_path / "rep")])
  assert rc == 1
  line = f"first divergent node: {add} ADD float32 (6,)"
  assert line in capsys.readouterr().out                  # not the root (a MUL), where the values were compared
  r = json.loads((tmp_path / "r.json").read_text())["results"][0]
  assert r["divergence"]["node"] == add and r["divergence"]["sources_agree"] is True
  assert line in (tmp_path / "r.xml").read_text()
  page = (tmp_path / "rep" / "index.html").read_text()
  assert f"node {add} ADD float32 (6,)" in page and "first divergent node: " in page   # the section and the mark's hover text
  assert main(["conformance", "--backend", backend, "--cases", str(tmp_path / "cases"), "--divergence", "0"]) == 1
  assert "first divergent node" not in capsys.readouterr().out


class _Case:
  def __init__(self, cid, covers): self.id, self.covers, self.kind = cid, covers, "negative"   # no failure details: the matrix is what is checked


def test_the_matrix_is_coloured_by_result_and_profile():
  rs = [Result("A/f", "b", "pass", profiles={"strict": "pass", "portable": "pass"}),
        Result("B/f", "b", "pass", profiles={"strict": "fail", "portable": "pass"}),
        Result("C/f", "b", "xfail"), Result("D/f", "b", "fail"), Result("E/f", "b", "unsupported")]
  cases = {r.case: _Case(r.case, [[r.case[0], "float32"]]) for r in rs}
  page = htmlreport.render(rs, cases)
  got = {op: col for col, op in re.findall(r'<td style="background:(#[0-9a-f]+)" title="(\w) float32', page)}
  assert got == {"A": htmlreport.COLOUR["pass"], "B": htmlreport.COLOUR["portable"], "C": htmlreport.COLOUR["xfail"],
                 "D": htmlreport.COLOUR["fail"], "E": htmlreport.COLOUR["unsupported"]}
  assert "portable-only pass" in page and "strict pass" in page and "expected failure" in page


def test_an_output_that_diverges_first_is_named_without_repeating_its_values(tmp_path):
  b = Builder()
  x, y = b.buffer((6,), "float32", 0), b.buffer((6,), "float32", 1)
  b.add("ADD", x, y)
  g = b.graph()
  ins = {"buf0": np.arange(6, dtype=np.float32), "buf1": np.ones(6, np.float32)}
  meta = {"id": "ONE/float32", "kind": "positive", "level": "tensor", "ops": ["ADD", "BUFFER", "VCONST"], "covers": [["ADD", "float32"]],
          "dtypes": ["float32", "index"], "devices": ["CPU"], "description": "one add"}
  write_case(tmp_path / "ONE", meta, g.dumps(), {k: (a, "float32") for k, a in ins.items()}, {"out0": (evaluate(g, ins)["out0"], "float32", 0, 0)})
  d = first_divergent(load_cases(tmp_path)[0], _ref_with_bad_add)
  assert d.output and d.line().startswith(f"first divergent node: {len(g.nodes) - 1} ADD float32 (6,): the output itself (")
