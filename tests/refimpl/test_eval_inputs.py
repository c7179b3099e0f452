"""Inputs are never made up or converted behind the user's back: `tinyspec eval` refuses to
read a buffer no input gives (unless --zeros), an input of another dtype is refused by the
reference evaluator and the compiled backends (unless --cast / cast=True), and every
refusal names its rule id once."""
from __future__ import annotations
import re
import numpy as np
import pytest
from hostile import cli, neg_graph, store_graph, kernel_nodes, write_json
from tinyspec.graph import from_document
from tinyspec.refimpl import evaluate, EvalError


def graph(nodes):
  g, diags = from_document(nodes)
  assert not diags
  return g


# ------------------------------------------------------------------ item: no silent zeros
def test_eval_without_an_input_refuses_and_zeros_is_the_explicit_opt_in(tmp_path):
  g = write_json(tmp_path / "g.json", neg_graph((2, 3)))
  rc, text = cli("eval", g)
  assert rc == 2, text
  assert "node 1 (BUFFER): BUFFER 'buf0' (float32, shape (2, 3)) is read but no input gives it" in text
  assert "--input buf0=FILE.npy" in text and "--zeros" in text and text.count("[eval.input]") == 1
  rc, text = cli("eval", g, "--zeros")
  assert rc == 0 and "out0: float32 [2, 3]" in text and "-0." in text, text


def test_a_buffer_that_is_only_written_needs_no_input(tmp_path):
  """Only a buffer whose contents are read needs one: a kernel's output PARAM does not."""
  rc, text = cli("eval", write_json(tmp_path / "k.json", kernel_nodes()), "--out", tmp_path / "o")
  assert rc == 0 and (tmp_path / "o" / "param0.npy").is_file(), text
  rc, text = cli("eval", write_json(tmp_path / "s.json", store_graph("w")))   # read by the ADD before the STORE
  assert rc == 2 and "BUFFER 'w'" in text and "[eval.input]" in text, text


def test_the_python_api_refuses_missing_inputs_when_asked():
  g = graph(neg_graph((3,)))
  assert evaluate(g)["out0"].tolist() == [0, 0, 0]   # the API's default: zeros (documented in evaluate())
  with pytest.raises(EvalError, match="is read but no input gives it") as e: evaluate(g, zeros=False)
  assert e.value.rule == "eval.input" and e.value.exit_code == 2 and e.value.node == 1


# ------------------------------------------------------------------ item: no silent casts
@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.float16])
def test_an_input_of_another_dtype_is_refused_unless_cast(tmp_path, dtype):
  g = write_json(tmp_path / "g.json", neg_graph((3,)))
  np.save(tmp_path / "x.npy", np.array([1, 2, 3], dtype))
  want = f"input 'buf0' has dtype {np.dtype(dtype).name}, the graph's BUFFER is float32"
  for cmd in (["eval"], ["run", "--backend", "ref"], ["run", "--backend", "c"]):
    rc, text = cli(cmd[0], g, *cmd[1:], "--input", f"buf0={tmp_path / 'x.npy'}")
    assert rc == 2 and want in text and text.count("[eval.input]") == 1, (cmd, text)
    rc, text = cli(cmd[0], g, *cmd[1:], "--input", f"buf0={tmp_path / 'x.npy'}", "--cast")
    assert rc == 0 and "-1" in text and "-3" in text, (cmd, text)


def test_cast_still_refuses_a_conversion_that_loses_values(tmp_path):
  g = write_json(tmp_path / "g.json", neg_graph((2,)))
  np.save(tmp_path / "x.npy", np.array([0.1, 1e300]))
  for cmd in (["eval"], ["run", "--backend", "c"]):
    rc, text = cli(cmd[0], g, *cmd[1:], "--input", f"buf0={tmp_path / 'x.npy'}", "--cast")
    assert rc == 2 and "do not convert exactly" in text and "[eval.input]" in text, (cmd, text)


def test_the_python_apis_refuse_a_dtype_mismatch_too():
  from tinyspec.compiler import run, compile_graph
  from tinyspec.compiler.executor import InputError
  g = graph(neg_graph((2,)))
  x = np.array([1.0, 2.0])   # float64
  with pytest.raises(EvalError, match="has dtype float64") as e: evaluate(g, {"buf0": x})
  assert e.value.rule == "eval.input"
  assert evaluate(g, {"buf0": x}, cast=True)["out0"].tolist() == [-1, -2]
  assert evaluate(g, {"buf0": [1.0, 2.0]})["out0"].tolist() == [-1, -2]   # a list has no dtype to keep
  with pytest.raises(InputError, match="has dtype float64") as e: run(g, {"buf0": x})
  assert e.value.rule == "eval.input" and str(e.value).count("[eval.input]") == 1
  assert run(g, {"buf0": x}, cast=True)["out0"].tolist() == [-1, -2]
  assert compile_graph(g, "c").run({"buf0": [1.0, 2.0]})["out0"].tolist() == [-1, -2]


# ------------------------------------------------------------------ item: a rule id once
SYMBOLIC = [{"op": "VCONST", "arg": {"values": [], "dtype": "index"}}, {"op": "CONST", "arg": {"value": 1, "dtype": "int32"}},
            {"op": "CONST", "arg": {"value": 8, "dtype": "int32"}}, {"op": "PARAM", "src": [0, 1, 2], "arg": {"slot": 0, "dtype": "int32"}}]


def _refusals():
  """(id, call) for every EvalError path the public API reaches with a plain graph."""
  neg = graph(neg_graph((3,)))
  f32 = np.ones(3, np.float32)
  bad_arg = graph([{"op": "CONST", "arg": {"value": 1, "dtype": "flaot32"}}])
  two_bad = graph([{"op": "CONST", "arg": {"value": 300, "dtype": "uint8"}}, {"op": "CONST", "arg": {"value": 1.5, "dtype": "int8"}}])
  yield "invalid-arg", lambda: evaluate(bad_arg)
  yield "invalid-two", lambda: evaluate(two_bad)
  yield "missing", lambda: evaluate(neg, zeros=False)
  yield "dtype", lambda: evaluate(neg, {"buf0": np.ones(3)})
  yield "inexact", lambda: evaluate(neg, {"buf0": np.full(3, 0.1)}, cast=True)
  yield "shape", lambda: evaluate(neg, {"buf0": np.ones(4, np.float32)})
  yield "twice", lambda: evaluate(neg, {"buf0": f32, 0: f32})
  yield "unknown-name", lambda: evaluate(neg, {"buf0": f32, "buf9": f32})
  yield "variant", lambda: evaluate(neg, {"buf0": f32}, variants=("nope",))
  yield "budget", lambda: evaluate(neg, {"buf0": f32}, budget=4)
  yield "budget-text", lambda: evaluate(neg, {"buf0": f32}, budget="lots")
  yield "symbolic-missing", lambda: evaluate(graph(SYMBOLIC))
  yield "symbolic-bounds", lambda: evaluate(graph(SYMBOLIC), {"param0": np.array(99, np.int32)})


@pytest.mark.parametrize("name, call", list(_refusals()), ids=[n for n, _ in _refusals()])
def test_every_refusal_names_its_rule_once_per_line(name, call):
  with pytest.raises(EvalError) as e: call()
  text = str(e.value)
  assert e.value.rule and f"[{e.value.rule}]" in text, text
  for line in text.splitlines():   # each diagnostic line carries its own id, once
    tags = re.findall(r"\[([\w.]+)\]", line)
    assert len(tags) == len(set(tags)) <= 1, line
  if "\n" not in text: assert text.count(f"[{e.value.rule}]") == 1, text


def test_an_invalid_graph_refused_by_eval_names_the_rule_once(tmp_path):
  g = write_json(tmp_path / "g.json", [{"op": "CONST", "arg": {"value": 1, "dtype": "flaot32"}}])
  rc, text = cli("eval", g)
  assert rc == 1 and text.count("[arg.schema]") == 1, text
  rc, text = cli("run", g, "--backend", "ref")
  assert rc == 1 and text.count("[arg.schema]") == 1, text


def test_a_symbolic_size_is_a_number_of_any_integer_dtype():
  """A PARAM with bounds holds a size, not a buffer: an int64 scalar for an int32 size is
  converted exactly (as the compiled backends read it), an inexact one is still refused."""
  g = graph(SYMBOLIC + [{"op": "ADD", "src": [3, 3]}])
  assert evaluate(g, {"param0": np.array(5, np.int64)})["out0"].tolist() == 10
  with pytest.raises(EvalError, match="do not convert exactly"): evaluate(g, {"param0": np.array(2.5)})
