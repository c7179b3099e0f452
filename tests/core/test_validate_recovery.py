"""Every error in one run, no cascades (issue 32 item 7: a bad PERMUTE argument under a MUL
with a wrong dtype appeared only after fixing the MUL). A node that breaks only dtype rules
is checked below against every dtype it may have (tinyspec/recovery.py): an error there is
reported when no dtype avoids it, and one that a fix upstream could remove is not."""
from __future__ import annotations
import json
import random
from pathlib import Path
import pytest
from tinyspec.graph import Graph
from tinyspec.validate import validate
from tinyspec.cli import main

ROOT = Path(__file__).resolve().parents[2]


def nodes(*extra) -> list:
  """buf0 float32 (2, 3), buf1 int32 (2, 3), buf2 float32 (4, 5), buf3 int32 (2, 3), MUL(buf0, buf1) (a dtype error) at 6."""
  return [{"op": "VCONST", "arg": {"values": [2, 3], "dtype": "index"}},
          {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
          {"op": "BUFFER", "src": [0], "arg": {"slot": 1, "dtype": "int32", "device": "CPU"}},
          {"op": "VCONST", "arg": {"values": [4, 5], "dtype": "index"}},
          {"op": "BUFFER", "src": [3], "arg": {"slot": 2, "dtype": "float32", "device": "CPU"}},
          {"op": "BUFFER", "src": [0], "arg": {"slot": 3, "dtype": "int32", "device": "CPU"}},
          {"op": "MUL", "src": [1, 2]}, *extra]


def found(ns) -> list:
  return [(d.node, d.rule) for d in validate(Graph.loads(json.dumps(ns))).diagnostics]


def test_an_error_below_a_dtype_error_is_found_in_the_same_run():
  """The issue's graph: the MUL's dtype and the PERMUTE's argument, both at once."""
  assert found(nodes({"op": "PERMUTE", "src": [6], "arg": [0, 0]})) == [(6, "dtype.match"), (7, "PERMUTE.perm")]
  # through consumers that pass: NEG, then a RESHAPE whose element count is wrong
  ns = nodes({"op": "NEG", "src": [6]}, {"op": "VCONST", "arg": {"values": [7], "dtype": "index"}}, {"op": "RESHAPE", "src": [7, 8]})
  assert found(ns) == [(6, "dtype.match"), (9, "RESHAPE.numel")]


def test_the_cli_reports_both(tmp_path, capsys):
  f = tmp_path / "g.json"
  f.write_text(json.dumps(nodes({"op": "PERMUTE", "src": [6], "arg": [0, 0]})))
  assert main(["validate", str(f)]) == 1
  out = capsys.readouterr().out
  assert "node 6 (MUL)" in out and "[dtype.match]" in out and "node 7 (PERMUTE)" in out and "[PERMUTE.perm]" in out, out


@pytest.mark.parametrize("consumer", [
  {"op": "ADD", "src": [6, 5]},                                   # int32: right if the MUL is fixed to int32
  {"op": "ADD", "src": [6, 1]},                                   # float32: right if fixed to float32
  {"op": "WHERE", "src": [6, 1, 1]},                              # a bool condition: right if fixed to bool
  {"op": "CAST", "src": [6], "arg": "float16"},
  {"op": "CMPLT", "src": [6, 5]},
], ids=["add-int", "add-float", "where-cond", "cast", "cmplt"])
def test_no_cascade_from_a_dtype_error(consumer):
  """What a fix of the MUL's dtype could make right is not reported."""
  assert found(nodes(consumer)) == [(6, "dtype.match")]


def test_an_error_no_dtype_avoids_is_reported():
  """ADD of the MUL (2, 3) and a (4, 5) buffer: no dtype of the MUL makes the shapes broadcast."""
  assert found(nodes({"op": "ADD", "src": [6, 4]})) == [(6, "dtype.match"), (7, "shape.broadcast")]


def test_below_other_errors_nothing_is_said():
  """A bad PERMUTE argument leaves its shape unknown: its consumers stay unchecked, as before."""
  ns = nodes({"op": "PERMUTE", "src": [1], "arg": [0, 0]}, {"op": "ADD", "src": [7, 4]})
  assert found(ns) == [(6, "dtype.match"), (7, "PERMUTE.perm")]


def test_recovery_costs_a_bounded_time():
  """A long chain below a dtype error, two unknown sources a node: every node still checked
  within the run budget, or left unchecked past it; never slow."""
  import time
  from tinyspec import recovery
  ns = nodes()
  for k in range(3000): ns.append({"op": "ADD", "src": [len(ns) - 1, len(ns) - 1 if k % 2 else 6]})
  t0 = time.perf_counter()
  d = found(ns)
  assert d[0] == (6, "dtype.match") and len(d) == 1
  assert time.perf_counter() - t0 < 30 and recovery.MAX_TOTAL_RUNS <= 20_000


def _ancestors(g: Graph) -> list[set]:
  out = []
  for n in g.nodes: out.append(set().union(*([{j} | out[j] for j in n.src] or [set()])))
  return out


def test_one_wrong_dtype_in_a_valid_graph_is_reported_without_cascades():
  """Adversary: corpus graphs with one BUFFER's dtype changed. One fix (the dtype back)
  makes each valid again, so no reported error may lie below another (a cascade), and the
  change is reported. Then a second, independent error planted below the first (a
  PERMUTE of a wrong argument over a consumer of it) is reported in the same run."""
  rng = random.Random(32)
  graphs = sorted((ROOT / "conformance" / "cases").glob("*/*/graph.json"))
  rng.shuffle(graphs)
  tried = planted = 0
  for path in graphs:
    doc = json.loads(path.read_text())
    g = Graph.loads(json.dumps(doc))
    if not validate(g).ok or g.level not in (None, "tensor"): continue
    ns = doc["nodes"] if isinstance(doc, dict) else doc
    bufs = [k for k, n in enumerate(ns) if n["op"] == "BUFFER" and n.get("arg", {}).get("dtype") == "float32"]
    if not bufs: continue
    k = rng.choice(bufs)
    ns[k]["arg"]["dtype"] = "int16"
    bad = Graph.loads(json.dumps(doc))
    diags = validate(bad).diagnostics
    if not diags: continue      # (every consumer takes any dtype)
    up = _ancestors(bad)
    at = {d.node for d in diags}
    assert not any(a in up[b] for a in at for b in at), (path, [(d.node, d.rule) for d in diags])
    first = min(at)
    ns.append({"op": "PERMUTE", "src": [first], "arg": [0] * 9})     # (no permutation of any rank)
    both = {(d.node, d.rule) for d in validate(Graph.loads(json.dumps(ns))).diagnostics}
    if any(d.rule == "dtype.match" and d.node == first for d in diags):
      assert any(n == len(ns) - 1 for n, _ in both), (path, sorted(both))
      planted += 1
    tried += 1
    if tried >= 60: break
  assert tried >= 30 and planted >= 10, (tried, planted)
