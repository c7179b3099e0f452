"""The graph file format round-trips losslessly (load -> save -> load gives the same nodes,
values told apart the way JSON does: -0.0 from 0.0, true from 1, 1 from 1.0), and UOps are
hash-consed (the same op, sources and arg give the same object)."""
from __future__ import annotations
import json
import pickle
from pathlib import Path
import pytest
from tinyspec.frozen import key
from tinyspec.graph import Graph, Node, load_file, load_text
from tinyspec.uop import UOp
from tinyspec.validate import validate

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted(p for p in (ROOT / "conformance").rglob("*") if p.suffix in (".json", ".yaml") and not p.name.endswith(".expect.json"))
LOADABLE = [p for p in CORPUS if (lambda g: g[0] is not None and not g[1])(load_file(p))]


def node_key(n) -> tuple:
  return (n.op, n.src, key(n.arg), key(n.dtype), key(n.shape), key(n.tag), n.name)


def graph_key(g: Graph) -> tuple:
  return ([node_key(n) for n in g.nodes], g.roots, g.level, key(g.meta))


def test_the_corpus_is_there():
  assert len(LOADABLE) >= 150, "the round trip should run over the whole rule corpus"


@pytest.mark.parametrize("path", LOADABLE, ids=[p.relative_to(ROOT).as_posix() for p in LOADABLE])
def test_load_save_load_is_identical(path, tmp_path):
  g = Graph.load(path)
  out = tmp_path / "g.json"
  g.save(out)
  g2 = Graph.load(out)
  assert graph_key(g2) == graph_key(g)
  assert g2.dumps() == g.dumps()    # the saved text is canonical: saving again changes nothing


@pytest.mark.parametrize("path", LOADABLE, ids=[p.relative_to(ROOT).as_posix() for p in LOADABLE])
def test_uops_rebuild_the_same_graph(path):
  g = Graph.load(path)
  if "graph.src" in validate(g).rules():   # sources that are not earlier nodes make no UOps
    with pytest.raises(ValueError, match=r"\[graph.src\]"): g.root_uops()
    return
  roots = g.root_uops()
  g2 = Graph.from_uops(*roots, level=g.level)
  assert all(a is b for a, b in zip(g2.root_uops(), roots, strict=True))   # the same objects: hash-consing
  reachable = {id(u) for r in roots for u in r.toposort()}
  assert len(g2.nodes) == len(reachable) <= len(g.nodes)   # one node per distinct reachable UOp


def test_values_json_tells_apart_stay_apart(tmp_path):
  text = json.dumps([{"op": "CONST", "arg": {"value": -0.0, "dtype": "float32"}}, {"op": "CONST", "arg": {"value": 0.0, "dtype": "float32"}},
                     {"op": "CONST", "arg": {"value": True, "dtype": "bool"}}, {"op": "CONST", "arg": {"value": 1, "dtype": "bool"}},
                     {"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}, {"op": "CONST", "arg": {"value": 1, "dtype": "float32"}},
                     {"op": "CONST", "arg": {"value": "nan", "dtype": "float32"}}, {"op": "CONST", "arg": {"value": 2**64 + 1, "dtype": "uint64"}}])
  g = load_text(text, "g.json")[0]
  g2 = Graph.loads(g.dumps())
  args = [n.arg["value"] for n in g2.nodes]
  assert [type(a) for a in args] == [float, float, bool, int, float, int, str, int]
  assert str(args[0]) == "-0.0" and str(args[1]) == "0.0" and args[7] == 2**64 + 1
  assert len({id(u) for u in g2.uops()}) == 8   # eight distinct UOps, no merging of == values


def test_yaml_specials_become_the_format_strings():
  g = load_text("- {op: CONST, arg: {value: .inf, dtype: float32}}\n- {op: CONST, arg: {value: -.inf, dtype: float32}}\n"
                "- {op: CONST, arg: {value: .nan, dtype: float32}}\n- {op: CONST, arg: {value: 2001-12-14, dtype: float32}}\n", "g.yaml")[0]
  assert [n.arg["value"] for n in g.nodes] == ["inf", "-inf", "nan", "2001-12-14"]   # dates stay strings
  assert json.loads(g.dumps())["nodes"][0]["arg"]["value"] == "inf"


def test_every_field_survives(tmp_path):
  doc = {"format": "tinyspec-graph", "version": 1, "level": "tensor", "roots": [1, 0], "meta": {"k": [1, {"x": None}]},
         "nodes": [{"op": "CONST", "arg": {"value": 1.5, "dtype": "float32"}, "dtype": "float32", "shape": [], "tag": {"t": [True]}, "name": "c"},
                   {"op": "NEG", "src": [0], "dtype": ["float32"], "shape": [[1], 2]}]}
  g = load_text(json.dumps(doc), "g.json")[0]
  assert json.loads(g.dumps()) == doc


# ------------------------------------------------------------------ hash-consing
def test_same_op_src_arg_is_the_same_object():
  a = UOp("CONST", (), {"value": 1, "dtype": "int32"})
  assert UOp("CONST", (), {"dtype": "int32", "value": 1}) is a       # key order does not matter
  b = UOp("ADD", (a, a))
  assert UOp("ADD", [a, a]) is b and UOp("ADD", (a, a), None) is b
  assert UOp("ADD", (a, a), dtype="int32") is not b                  # a declared dtype is part of the node
  assert a.replace(arg={"value": 1, "dtype": "int32"}) is a and a.replace(arg={"value": 2, "dtype": "int32"}) is not a
  assert pickle.loads(pickle.dumps(b)) is b


@pytest.mark.parametrize("x,y", [(-0.0, 0.0), (True, 1), (False, 0), (1, 1.0), (float("nan"), "nan"), ([1], (2,)), ({"a": 1}, {"a": True})])
def test_values_python_merges_stay_distinct(x, y):
  u, v = UOp("CONST", (), {"value": x, "dtype": "float32"}), UOp("CONST", (), {"value": y, "dtype": "float32"})
  assert u is not v
  assert UOp("CONST", (), {"value": x, "dtype": "float32"}) is u


def test_nan_args_hash_cons():
  assert UOp("CONST", (), {"value": float("nan"), "dtype": "float32"}) is UOp("CONST", (), {"value": float("nan"), "dtype": "float32"})


def test_args_are_immutable():
  u = UOp("CONST", (), {"value": 1, "dtype": "int32"})
  with pytest.raises(TypeError): u.arg["value"] = 2
  v = UOp("VCONST", (), {"values": [1, 2], "dtype": "int32"})
  assert v.arg["values"] == (1, 2)


def test_python_float_specials_save_as_the_format_strings():
  """A graph built in Python may hold float('inf') / float('nan'); saving writes the
  format's strings, which load back to the same CONSTs."""
  u = UOp("MAX", (UOp("CONST", (), {"value": float("-inf"), "dtype": "float32"}), UOp("CONST", (), {"value": float("nan"), "dtype": "float32"})))
  g = Graph.loads(Graph.from_uops(u).dumps())
  assert [n.arg["value"] for n in g.nodes[:2]] == ["-inf", "nan"] and validate(g).ok


def test_reached_leaves_out_what_no_root_reaches():
  nodes = [Node("CONST", (), {"value": 1, "dtype": "int32"}), Node("CONST", (), {"value": 2, "dtype": "int32"}),
           Node("NEG", (1,)), Node("ADD", (0, 0))]
  g = Graph(nodes, None, "tensor", {"k": 1})
  r = g.reached()
  assert [n.op for n in r.nodes] == ["CONST", "ADD"] and r.nodes[1].src == (0, 0) and r.roots is None and r.meta == {"k": 1}
  two = Graph(nodes, [3, 2], "tensor").reached()
  assert [n.op for n in two.nodes] == ["CONST", "CONST", "NEG", "ADD"] and two.roots == [3, 2]
  assert Graph(nodes, [2], "tensor").reached().nodes[1].src == (0,)
