"""Bad input never gives a traceback: every malformed file gets a clear message naming the
file (and the node, op and rule id where there is one) and the documented exit code
(1 invalid graph, 2 unreadable file or bad usage). Through `tinyspec.cli.main` and, for a
few, the real console entry point in a subprocess."""
from __future__ import annotations
import json
import subprocess
import sys
import pytest
from tinyspec.cli import main
from tinyspec.graph import Graph
from tinyspec.uop import UOp
from tinyspec.validate import validate

CONST = {"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}


def run_cli(capsys, *argv) -> tuple[int, str]:
  rc = main(list(argv))
  out = capsys.readouterr()
  text = out.out + out.err
  assert "Traceback" not in text
  return rc, text


def check(capsys, tmp_path, name: str, data: bytes, rc: int, rule: str, *fragments: str):
  f = tmp_path / name
  f.write_bytes(data)
  got, text = run_cli(capsys, "validate", str(f))
  assert got == rc, text
  assert f"{f}: " in text and f"[{rule}]" in text, text
  for frag in fragments: assert frag in text, text
  return text


def nodes(*ns) -> bytes: return json.dumps(list(ns)).encode()


# ------------------------------------------------------------------ unreadable files (exit 2)
UNREADABLE = [
  ("truncated.json", b'{"nodes": [{"op": "CONST", "arg": {"value": 1', "invalid JSON at line 1"),
  ("garbage.json", bytes(range(256)) * 4, "not UTF-8"),
  ("garbage", b"\x7fELF\x02\x01\x01\x00" + bytes(100), "invalid YAML"),
  ("tag.yaml", b"!!python/object/apply:os.system ['echo pwned']\n", "YAML tags are not accepted"),
  ("tag-in-node.yaml", b"- {op: CONST, arg: !!python/object:builtins.dict {}}\n", "YAML tags are not accepted"),
  ("binary-tag.yaml", b"- {op: BINARY, arg: !!binary AAEC}\n", "no JSON equivalent"),
  ("alias.yaml", b"- &a {op: CONST, arg: {value: 1, dtype: int32}}\n- *a\n", "aliases"),
  ("int-key.yaml", b"- {op: CONST, arg: {1: 2}}\n", "not a string"),
  ("empty.json", b"", "empty"),
  ("blank.yaml", b"  \n\n", "empty"),
  ("nan.json", b'[{"op": "CONST", "arg": {"value": NaN, "dtype": "float32"}}]', "NaN is not JSON"),
  ("infinity.json", b'[{"op": "CONST", "arg": {"value": -Infinity, "dtype": "float32"}}]', "-Infinity is not JSON"),
  ("overflow.json", b'[{"op": "CONST", "arg": {"value": 1e400, "dtype": "float32"}}]', "does not fit a float64"),
]


@pytest.mark.parametrize("name,data,fragment", UNREADABLE, ids=[u[0] for u in UNREADABLE])
def test_unreadable_file(capsys, tmp_path, name, data, fragment):
  check(capsys, tmp_path, name, data, 2, "file.parse", fragment)


def test_missing_file_and_directory(capsys, tmp_path):
  rc, text = run_cli(capsys, "validate", str(tmp_path / "nope.json"))
  assert rc == 2 and "nope.json: cannot read file" in text and "[file.read]" in text
  rc, text = run_cli(capsys, "validate", str(tmp_path))
  assert rc == 2 and "[file.read]" in text


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_50_mb_of_nesting(capsys, tmp_path, opener):
  data = opener.encode() * (50_000_000 // len(opener))
  check(capsys, tmp_path, "deep.json", data, 2, "file.parse", "nesting too deep")


def test_deep_yaml_nesting(capsys, tmp_path):
  check(capsys, tmp_path, "deep.yaml", b"- " * 200_000 + b"x\n", 2, "file.parse", "nesting too deep")


# ------------------------------------------------------------------ schema errors (exit 1)
NODE_FIELDS = [  # (field, bad value, words of the message)
  ("op", 5, "'op' must be an upper-case op name"), ("op", None, "'op' must be"), ("op", "const", "'op' must be"),
  ("op", "A" * 65, "'op' must be"), ("op", ["CONST"], "'op' must be"),
  ("src", "0", "'src' must be a list of node indices"), ("src", [True], "'src' must be"), ("src", [-1], "'src' must be"),
  ("src", [0.5], "'src' must be"), ("src", {"0": 0}, "'src' must be"), ("src", [None], "'src' must be"),
  ("dtype", 5, "'dtype' must be a dtype name"), ("dtype", [1], "'dtype' must be"), ("dtype", {"a": 1}, "'dtype' must be"),
  ("shape", "x", "'shape' must be a list"), ("shape", [-1], "'shape' must be"), ("shape", [1.5], "'shape' must be"),
  ("shape", {"a": 1}, "'shape' must be"), ("shape", [True], "'shape' must be"),
  ("name", 5, "'name' must be a string"), ("name", "x" * 129, "'name' must be"),
  ("extra", 1, "unknown field(s) extra"),
]


@pytest.mark.parametrize("field,value,words", NODE_FIELDS, ids=[f"{f}={json.dumps(v)[:12]}" for f, v, _ in NODE_FIELDS])
def test_wrong_type_in_a_node_field(capsys, tmp_path, field, value, words):
  bad = {"op": "NEG", "src": [0], field: value}
  text = check(capsys, tmp_path, "g.json", nodes(CONST, bad), 1, "file.schema", "node 1", words)
  assert text.count("[") >= 1


def test_wrong_type_in_an_arg_is_an_arg_schema_error(capsys, tmp_path):
  for arg in ("x", 5, [1], {"value": "one", "dtype": "int32"}, {"value": 1, "dtype": "int33"}):
    check(capsys, tmp_path, "g.json", nodes({"op": "CONST", "arg": arg}), 1, "arg.schema", "node 0 (CONST)")


def test_a_node_that_is_not_an_object(capsys, tmp_path):
  for node in (5, "CONST", None, [CONST]):
    check(capsys, tmp_path, "g.json", nodes(CONST, node), 1, "file.schema", "node 1", "a node must be an object")


TOP_FIELDS = [
  ("format", 3, "'format' must be"), ("format", "other", "'format' must be"),
  ("version", "1", "unsupported version"), ("version", 2, "unsupported version"), ("version", True, "unsupported version"),
  ("level", 7, "'level' must be"), ("level", "galaxy", "'level' must be"),
  ("roots", "0", "'roots' must be"), ("roots", [-1], "'roots' must be"), ("roots", [True], "'roots' must be"),
  ("meta", [], "'meta' must be an object"), ("edges", [], "unknown top-level field(s): edges"),
  ("nodes", {}, "'nodes' must be a list"), ("nodes", "x", "'nodes' must be a list"), ("nodes", None, "'nodes' must be a list"),
  ("nodes", [], "'nodes' is empty"),
]


@pytest.mark.parametrize("field,value,words", TOP_FIELDS, ids=[f"{f}={json.dumps(v)}" for f, v, _ in TOP_FIELDS])
def test_wrong_type_in_a_top_level_field(capsys, tmp_path, field, value, words):
  doc = {"format": "tinyspec-graph", "version": 1, "nodes": [CONST]}
  doc[field] = value
  check(capsys, tmp_path, "g.json", json.dumps(doc).encode(), 1, "file.schema", words)


@pytest.mark.parametrize("doc", ['"graph"', "42", "null", "true"])
def test_a_document_that_is_not_a_graph(capsys, tmp_path, doc):
  check(capsys, tmp_path, "g.json", doc.encode(), 1, "file.schema", "must be an object with 'nodes' or a list of nodes")


def test_every_schema_error_is_reported_and_the_rest_validated(capsys, tmp_path):
  """A broken node does not hide other errors: two schema errors and a rule broken elsewhere."""
  data = nodes(CONST, {"op": "NEG", "src": "0"}, {"op": "NEG", "src": [1]}, {"op": "ADD", "src": [0, 0], "dtype": "float32", "shap": 1},
               {"op": "ADD", "src": [0, 0], "dtype": "float32"})
  text = check(capsys, tmp_path, "g.json", data, 1, "file.schema", "node 1 (NEG): 'src' must be", "node 3 (ADD): unknown field(s) shap",
               "node 4 (ADD): declared dtype float32 but derived int32 [declared.dtype]")
  assert "node 2" not in text   # NEG of a broken node is not blamed for it


# ------------------------------------------------------------------ graph errors (exit 1)
def test_src_out_of_range_forward_and_self(capsys, tmp_path):
  check(capsys, tmp_path, "g.json", nodes(CONST, {"op": "ADD", "src": [0, 7]}), 1, "graph.src", "node 1 (ADD): src 7 refers to no node")
  check(capsys, tmp_path, "g.json", nodes({"op": "NEG", "src": [1]}, CONST), 1, "graph.src", "node 0 (NEG): src 1 refers to a later node")
  check(capsys, tmp_path, "g.json", nodes(CONST, {"op": "ADD", "src": [0, 1]}), 1, "graph.src", "node 1 (ADD): src 1 refers to itself")
  doc = {"nodes": [CONST], "roots": [0, 3]}
  check(capsys, tmp_path, "g.json", json.dumps(doc).encode(), 1, "graph.src", "root 3 is not a node index")


def test_unknown_op(capsys, tmp_path):
  check(capsys, tmp_path, "g.json", nodes(CONST, {"op": "FROB", "src": [0]}), 1, "graph.unknown_op", "node 1 (FROB): unknown op 'FROB'")


def test_shape_of_1e15_elements(capsys, tmp_path):
  data = nodes({"op": "VCONST", "arg": {"values": [10**5, 10**5, 10**5], "dtype": "index"}},
               {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}})
  check(capsys, tmp_path, "g.json", data, 1, "shape.limit", "node 1 (BUFFER)", "more than 1099511627776 elements")


def test_huge_numbers_in_args(capsys, tmp_path):
  check(capsys, tmp_path, "g.json", nodes({"op": "CONST", "arg": {"value": 10**300, "dtype": "int64"}}), 1, "CONST.value", "node 0 (CONST)")
  big = nodes({"op": "VCONST", "arg": {"values": [10**30, 10**30], "dtype": "index"}})
  check(capsys, tmp_path, "g.json", big, 1, "CONST.value", "node 0 (VCONST)")
  data = nodes({"op": "VCONST", "arg": {"values": [2**62, 2**62, 0], "dtype": "index"}},
               {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}})
  f = tmp_path / "zero.json"; f.write_bytes(data)
  assert run_cli(capsys, "validate", str(f))[0] == 0   # huge dims times a zero dim: no elements


def test_custom_op_with_c_code_validates_but_is_marked_untrusted(capsys, tmp_path):
  data = nodes({"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}},
               {"op": "CUSTOM", "src": [0], "arg": {"fmt": 'system("rm -rf /"); {0}', "dtype": "float32"}})
  f = tmp_path / "custom.json"; f.write_bytes(data)
  rc, text = run_cli(capsys, "validate", str(f))
  assert rc == 0 and "valid (2 nodes, kernel level" in text and "untrusted op(s) CUSTOM" in text
  rc, text = run_cli(capsys, "validate", "--json", str(f))
  assert rc == 0 and json.loads(text)["files"][0]["untrusted"] == [1]


def test_100k_node_chain(capsys, tmp_path):
  chain = [{"op": "CONST", "arg": {"value": 1.0, "dtype": "float32"}}] + [{"op": "NEG", "src": [i]} for i in range(100_000)]
  f = tmp_path / "chain.json"; f.write_text(json.dumps(chain))
  rc, text = run_cli(capsys, "validate", str(f))
  assert rc == 0 and "valid (100001 nodes" in text
  chain[50_000]["src"] = [70_000]
  f.write_text(json.dumps(chain))
  rc, text = run_cli(capsys, "validate", str(f))
  assert rc == 1 and "node 50000 (NEG): src 70000 refers to a later node" in text and text.count("[") == 1


def test_100k_uop_chain_has_no_recursion_limit():
  c = UOp("CONST", (), {"value": 1, "dtype": "int32"})
  x = c
  for _ in range(100_000): x = UOp("ADD", (x, c))
  g = Graph.from_uops(x)
  assert len(g.nodes) == 100_001 and g.nodes[-1].src == (99_999, 0)
  order = x.toposort()
  assert order[-1] is x and order[0] is c and len(order) == 100_001
  us = g.uops()
  assert us[-1] is x and us[0] is c   # hash-consing: rebuilding gives the same objects
  res = validate(g)
  assert res.ok and res.views[-1].min_max == (100_001, 100_001)


# ------------------------------------------------------------------ usage errors (exit 2)
@pytest.mark.parametrize("argv", [[], ["validate"], ["validate", "--level", "galaxy", "x.json"], ["frobnicate"], ["props"],
                                  ["validate", "--bogus", "x.json"]])
def test_bad_usage_exits_2(capsys, argv):
  with pytest.raises(SystemExit) as e:
    rc = main(argv)
    raise SystemExit(rc)
  assert e.value.code == 2
  assert "Traceback" not in capsys.readouterr().err


# ------------------------------------------------------------------ the real entry point
@pytest.mark.parametrize("data,rc,rule", [(b'{"nodes": [', 2, "file.parse"), (b"!!python/name:os.system x\n", 2, "file.parse"),
                                          (nodes(CONST, {"op": "ADD", "src": [0, 5]}), 1, "graph.src")])
def test_console_entry_point(tmp_path, data, rc, rule):
  f = tmp_path / ("g.yaml" if data.startswith(b"!!") else "g.json")
  f.write_bytes(data)
  r = subprocess.run([sys.executable, "-m", "tinyspec.cli", "validate", str(f)], capture_output=True, text=True, timeout=120)
  assert r.returncode == rc, r.stdout + r.stderr
  assert f"[{rule}]" in r.stdout and "Traceback" not in r.stdout + r.stderr
