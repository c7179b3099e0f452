"""The evaluate() contract: graph kinds, inputs and outputs, refusals (invalid graphs,
untrusted ops, the memory budget), trace, supported_ops, and `tinyspec eval`."""
from __future__ import annotations
import json
import numpy as np
import pytest
from tinyspec.tables import tables
from tinyspec.cli import main
from tinyspec.refimpl import evaluate, EvalError, EvalResult, supported_ops
from tinyspec.refimpl.build import Builder
from tinyspec.refimpl.budget import parse_bytes, default_budget
from tinyspec.limits import memory_available

F32 = "float32"


def add_graph():
  b = Builder()
  b.ADD(b.buffer((3,), F32, 0), b.buffer((3,), F32, 1, name="y"))
  return b.graph()


# ------------------------------------------------------------------ graphs, inputs, outputs
def test_graph_uop_and_uop_list_give_the_same_result():
  g = add_graph()
  x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
  want = evaluate(g, {"buf0": x, "y": y})["out0"]
  roots = g.root_uops()
  assert evaluate(roots[0], {0: x, "y": y})["out0"].tolist() == want.tolist()
  assert evaluate(roots, {0: x, "y": y})["out0"].tolist() == want.tolist()
  with pytest.raises(TypeError): evaluate("not a graph")


def test_inputs_by_name_slot_and_int_key_missing_ones_are_zero():
  g = add_graph()
  assert evaluate(g, {0: np.ones(3, np.float32)})["out0"].tolist() == [1, 1, 1]
  assert evaluate(g)["out0"].tolist() == [0, 0, 0]


def test_inputs_that_do_not_fit_are_refused():
  g = add_graph()
  with pytest.raises(EvalError, match="shape"): evaluate(g, {0: np.ones(4, np.float32)})
  with pytest.raises(EvalError, match="convert exactly"): evaluate(g, {0: np.array([0.1, 0.2, 0.3])}, cast=True)
  with pytest.raises(EvalError, match=r"input 'buf0' has dtype float64, the graph's BUFFER is float32.*\[eval.input\]"):
    evaluate(g, {0: np.array([0.5, 0.25, 1.0])})   # an array of another dtype: refused, however exact
  assert evaluate(g, {0: np.array([0.5, 0.25, 1.0])}, cast=True)["out0"].tolist() == [0.5, 0.25, 1.0]
  with pytest.raises(EvalError, match="name no BUFFER"): evaluate(g, {"buf7": np.ones(3, np.float32)})
  # exact conversions are fine (float64 values that are float32 values, Python lists)
  assert evaluate(g, {0: [1.5, 2.0, -3.0]})["out0"].tolist() == [1.5, 2.0, -3.0]


def test_tuple_root_and_stored_buffers_are_outputs():
  b = Builder()
  x = b.buffer((2,), F32, 0)
  t = b.TUPLE(x, b.NEG(x))
  s = b.STORE(b.buffer((2,), F32, 1), b.NEG(x))
  out = evaluate(b.graph(roots=[t, s]), {0: np.array([1, 2], np.float32)})
  assert sorted(out) == ["buf1", "out0.0", "out0.1"]
  assert out["buf1"].tolist() == [-1, -2]


def test_outputs_do_not_alias_inputs():
  b = Builder()
  b.RESHAPE(b.buffer((4,), F32, 0), b.shape(2, 2))
  x = np.arange(4, dtype=np.float32)
  out = evaluate(b.graph(), {0: x})["out0"]
  out[0, 0] = 99
  assert x[0] == 0


# ------------------------------------------------------------------ refusals
def test_invalid_graph_is_refused_with_the_validator_diagnostics():
  b = Builder()
  b.ADD(b.const(1, "int32"), b.const(1.0, F32))
  with pytest.raises(EvalError) as e: evaluate(b.graph())
  assert e.value.rule == "dtype.match" and e.value.node == 2 and e.value.diagnostics


@pytest.mark.parametrize("op", [n for n, o in tables().ops.items() if o.untrusted])
def test_untrusted_ops_are_refused(op):
  ex = tables().ops[op].example
  from tinyspec.graph import from_document
  g, _ = from_document(ex)
  with pytest.raises(EvalError, match="untrusted") as e: evaluate(g)
  assert e.value.op == op and e.value.rule == "eval.untrusted"
  with pytest.raises(EvalError, match="nothing the reference evaluator can run"): evaluate(g, allow_untrusted=True)


def test_memory_budget_refuses_before_allocating():
  b = Builder()
  x = b.buffer((1, 4096), F32, 0)
  big = b.EXPAND(x, b.shape(4096, 4096))         # a view: free
  b.ADD(big, b.const(1.0, F32))                   # 64 MiB of float32 to materialize
  with pytest.raises(EvalError) as e: evaluate(b.graph(), budget=32 << 20)
  assert e.value.rule == "eval.budget" and e.value.op == "ADD" and "bytes" in str(e.value)
  assert evaluate(b.graph(), budget="1G")["out0"].shape == (4096, 4096)


def test_a_reshape_that_copies_a_window_far_over_the_budget_is_refused_quickly():
  # tinygrad's Tensor.arange(N) at tensor level: a (N+1, 2N-1) broadcast window reshaped
  # flat, which NumPy copies (issue 31 S15: a raw MemoryError, or a worker killed)
  import resource
  import time
  b = Builder()
  x = b.buffer((1, 199999), "int32", 0)
  window = b.EXPAND(x, b.shape(100001, 199999))                 # a view: free
  b.RESHAPE(window, b.const(100001 * 199999, "index"))          # 80 GB copied
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  t = time.perf_counter()
  with pytest.raises(EvalError) as e: evaluate(b.graph(), budget="1G")
  assert e.value.rule == "eval.budget" and e.value.op == "RESHAPE" and "80,000,399,996 bytes" in str(e.value)
  assert time.perf_counter() - t < 5 and resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200_000   # KiB
  b2 = Builder()
  small = b2.EXPAND(b2.buffer((1, 3), "int32", 0), b2.shape(4, 3))
  b2.RESHAPE(small, b2.const(12, "index"))                      # a copy within the budget: as before
  assert evaluate(b2.graph())["out0"].shape == (12,)


def test_an_allocation_no_estimate_foresaw_is_the_budgets_refusal(monkeypatch):
  from tinyspec.refimpl.ops import movement
  def no_memory(*a, **k): raise MemoryError("Unable to allocate 74.5 GiB")
  monkeypatch.setattr(movement, "np", type("NP", (), {"zeros": staticmethod(no_memory)}))
  b = Builder()
  b.PAD(b.buffer((4,), F32, 0), b.shape(1), b.shape(6))
  with pytest.raises(EvalError) as e: evaluate(b.graph())
  assert e.value.rule == "eval.budget" and e.value.op == "PAD" and "74.5 GiB" in str(e.value)


def test_budget_from_the_environment(monkeypatch):
  monkeypatch.setenv("TINYSPEC_EVAL_BUDGET", "1M")
  assert default_budget() == 1 << 20
  b = Builder()
  b.ADD(b.buffer((1 << 20,), F32, 0), b.const(1.0, F32))
  with pytest.raises(EvalError, match="budget"): evaluate(b.graph())
  monkeypatch.delenv("TINYSPEC_EVAL_BUDGET")
  assert default_budget() == memory_available() // 4
  assert parse_bytes("2G") == 2 << 30 and parse_bytes("512MiB") == 512 << 20 and parse_bytes(1000) == 1000
  with pytest.raises(EvalError): parse_bytes("lots")


def test_dead_values_are_freed():
  # a chain of 64 MiB steps stays well under 3 steps' worth of memory when nothing is traced
  b = Builder()
  x = b.buffer((1 << 24,), F32, 0)
  for _ in range(6): x = b.ADD(x, b.const(1.0, F32))
  res = evaluate(b.graph(), {0: np.zeros(1 << 24, np.float32)}, trace=False, budget=(200 + 64) << 20)   # the 64 MiB input counts too
  assert res["out0"][0] == 6


# ------------------------------------------------------------------ trace
def test_trace_has_every_value_by_node_index():
  b = Builder()
  x = b.buffer((3,), F32, 0)
  m = b.MUL(x, b.const(2.0, F32))
  a = b.ADD(m, b.const(1.0, F32))
  res = evaluate(b.graph(), {0: np.array([1, 2, 3], np.float32)}, trace=True)
  assert isinstance(res, EvalResult) and res.outputs["out0"].tolist() == [3, 5, 7]
  assert res.values[m].tolist() == [2, 4, 6] and res.values[a].tolist() == [3, 5, 7] and res.values[x].tolist() == [1, 2, 3]
  assert res["out0"].tolist() == [3, 5, 7]   # an EvalResult also reads like the outputs


def test_trace_pins_the_first_differing_node():
  b = Builder()
  x = b.buffer((2,), "int32", 0)
  chain = [x]
  for k in range(5): chain.append(b.ADD(chain[-1], b.const(k, "int32")))
  g = b.graph()
  t1 = evaluate(g, {0: np.array([1, 2], np.int32)}, trace=True).values
  t2 = evaluate(g, {0: np.array([1, 3], np.int32)}, trace=True).values
  first = min(i for i in t1 if not np.array_equal(t1[i], t2[i]))
  assert first == x


# ------------------------------------------------------------------ supported_ops
def test_supported_ops_come_from_the_tables():
  sup = supported_ops()
  T = tables()
  for name, op in T.ops.items():
    if op.untrusted: assert name not in sup
    else: assert sup[name] == set(op.levels), name


# ------------------------------------------------------------------ the CLI
def test_cli_eval(tmp_path, capsys):
  g = add_graph()
  f = tmp_path / "g.json"
  g.save(f)
  np.save(tmp_path / "x.npy", np.arange(3, dtype=np.float32))
  np.savez(tmp_path / "in.npz", y=np.ones(3, np.float32))
  assert main(["eval", str(f), "--input", f"buf0={tmp_path / 'x.npy'}", "--input", str(tmp_path / "in.npz"), "--out", str(tmp_path / "out")]) == 0
  assert np.load(tmp_path / "out" / "out0.npy").tolist() == [1, 2, 3]
  assert main(["eval", str(f), "-i", str(tmp_path / "in.npz"), "-o", str(tmp_path / "o.npz"), "--trace", "--zeros"]) == 0
  with np.load(tmp_path / "o.npz") as z: assert z["out0"].tolist() == [1, 1, 1] and "node2" in z.files   # buf0 not given: zeros
  capsys.readouterr()
  assert main(["eval", str(f), "-i", str(tmp_path / "in.npz"), "--zeros"]) == 0
  assert "out0: float32 [3]" in capsys.readouterr().out


def test_cli_eval_exit_codes(tmp_path, capsys):
  g = add_graph()
  f = tmp_path / "g.json"
  g.save(f)
  assert main(["eval", str(f), "--input", f"buf0={tmp_path / 'missing.npy'}"]) == 2        # unreadable input
  (tmp_path / "bad.npy").write_bytes(b"not numpy")
  assert main(["eval", str(f), "--input", f"buf0={tmp_path / 'bad.npy'}"]) == 2
  np.save(tmp_path / "x4.npy", np.zeros(4, np.float32))
  assert main(["eval", str(f), "--input", f"buf0={tmp_path / 'x4.npy'}"]) == 2               # wrong shape
  bad = tmp_path / "invalid.json"
  bad.write_text(json.dumps([{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}}, {"op": "NEG", "src": [0, 0]}]))
  assert main(["eval", str(bad)]) == 1                                                       # invalid graph
  assert main(["eval", str(tmp_path / "nope.json")]) == 2                                     # unreadable graph
  b = Builder()
  b.ADD(b.buffer((1 << 20,), F32, 0), b.const(1.0, F32))
  big = tmp_path / "big.json"
  b.graph().save(big)
  assert main(["eval", str(big), "--budget", "1M"]) == 1                                     # over budget
  err = capsys.readouterr().err
  assert "[eval.budget]" in err and "[graph.arity]" in err


def test_cli_eval_strict_bounds(tmp_path, capsys):
  # out[0] = x[5] of a 4-element x: zero by decision index-oob, refused with --strict-bounds
  b = Builder()
  x = b.param((4,), F32, 0); out = b.param((1,), F32, 1)
  b.SINK(b.STORE(b.INDEX(out, b.const(0, "index")), b.INDEX(x, b.const(5, "index"))))
  f = tmp_path / "k.json"
  b.graph(level="kernel").save(f)
  np.save(tmp_path / "x.npy", np.ones(4, np.float32))
  assert main(["eval", str(f), "-i", f"param0={tmp_path / 'x.npy'}", "-o", str(tmp_path / "o")]) == 0
  assert np.load(tmp_path / "o" / "param1.npy").tolist() == [0.0]
  capsys.readouterr()
  assert main(["eval", str(f), "-i", f"param0={tmp_path / 'x.npy'}", "--strict-bounds"]) == 1
  assert "[eval.oob]" in capsys.readouterr().err
