"""`tinyspec compile` and `tinyspec run`: output, stage dumps, exit codes, refusals."""
from __future__ import annotations
import json
import numpy as np
import pytest
from tinyspec.cli import main
from tinyspec.validate import validate_file

GRAPH = {"nodes": [
  {"op": "VCONST", "arg": {"values": [4, 3], "dtype": "index"}},
  {"op": "BUFFER", "src": [0], "arg": {"slot": 0, "dtype": "float32", "device": "CPU"}},
  {"op": "BUFFER", "src": [0], "arg": {"slot": 1, "dtype": "float32", "device": "CPU"}},
  {"op": "ADD", "src": [1, 2]},
  {"op": "REDUCE", "src": [3], "arg": {"op": "MAX", "axes": [1]}},
]}


@pytest.fixture
def graph_file(tmp_path):
  f = tmp_path / "g.json"
  f.write_text(json.dumps(GRAPH))
  return f


@pytest.mark.parametrize("target", ["c", "opencl"])
def test_compile_prints_kernels_and_dumps_valid_stages(graph_file, tmp_path, capsys, target):
  d = tmp_path / "stages"
  assert main(["compile", str(graph_file), "--target", target, "--dump-stages", str(d)]) == 0
  out = capsys.readouterr().out
  assert "r_4_1" in out and ("__kernel" in out) == (target == "opencl")
  files = sorted(p.name for p in d.iterdir())
  for stage in ("input", "callify", "rangeify", "optimize", "expand", "isel", "linearize", "memplan", "render"):
    assert any(f"_{stage}" in f for f in files), stage
  for f in d.iterdir():
    res = validate_file(f)
    assert res.ok, (f.name, [x.format() for x in res.diagnostics])


def test_compile_explain_names_the_rules_that_fired_per_stage(graph_file, capsys):
  assert main(["compile", str(graph_file), "--explain"]) == 0
  out = capsys.readouterr().out
  assert "r_4_1" not in out                 # the explanation, not the source
  stages = [line[:-1] for line in out.splitlines() if not line.startswith(" ")]
  assert stages and all(s in ("callify", "rangeify", "optimize", "expand", "isel", "linearize", "memplan", "decide", "render") for s in stages)
  assert "expand:" in out and "max_on_integers" in out    # the float MAX reduce runs on integer keys
  counts = [int(line.rsplit(" x", 1)[1]) for line in out.splitlines() if line.startswith("  ")]
  assert counts and all(n >= 1 for n in counts)


@pytest.mark.parametrize("backend", ["ref", "c", "opencl"])
def test_run_writes_outputs(graph_file, tmp_path, backend):
  a = np.arange(12, dtype=np.float32).reshape(4, 3)
  np.save(tmp_path / "a.npy", a)
  out = tmp_path / "out"
  assert main(["run", str(graph_file), "--backend", backend, "--input", f"buf0={tmp_path / 'a.npy'}", "--out", str(out)]) == 0
  got = np.load(out / "out0.npy")
  assert got.tolist() == (a + 0).max(axis=1, keepdims=True).tolist()   # buf1 is missing: zeros


def test_untrusted_ops_are_refused(tmp_path, capsys):
  f = tmp_path / "u.json"
  f.write_text(json.dumps({"nodes": [{"op": "CONST", "arg": {"value": 1, "dtype": "int32"}},
                                     {"op": "CUSTOM", "src": [0], "arg": {"fmt": "system(\"rm -rf /\")", "dtype": "int32"}},
                                     {"op": "SINK", "src": [1]}]}))
  assert main(["compile", str(f)]) == 1
  err = capsys.readouterr().err
  assert "[compile.untrusted]" in err and "rm -rf" not in err


def test_refusals_and_bad_input_exit_codes(tmp_path, capsys):
  bad = tmp_path / "bad.json"
  bad.write_text('{"nodes": [{"op": "ADD", "src": [0, 0]}]}')
  assert main(["compile", str(bad)]) == 1                       # invalid graph: the validator's rule id
  assert "[graph.src]" in capsys.readouterr().err
  assert main(["compile", str(tmp_path / "missing.json")]) == 2
  trunc = tmp_path / "t.json"
  trunc.write_text('{"nodes": [')
  assert main(["compile", str(trunc)]) == 2
  g = tmp_path / "g.json"
  g.write_text(json.dumps(GRAPH))
  assert main(["compile", str(g), "--opt", '[["SPLIT", 0, [3, "UPCAST"]]]']) == 1
  assert "[opt.divisible]" in capsys.readouterr().err
  assert main(["compile", str(g), "--opt", "not json"]) == 2
  assert main(["run", str(g), "--backend", "c", "--input", "nope"]) == 2
  np.save(tmp_path / "x.npy", np.zeros(3, np.float32))
  assert main(["run", str(g), "--backend", "c", "--input", f"buf7={tmp_path / 'x.npy'}"]) == 2   # names no storage


@pytest.mark.parametrize("opt", ['7', '{"r_4_1": 5}', '[5]', '[["SPLIT"]]', '[["PADTO", 0, "4"]]'])
def test_malformed_opts_are_refused_without_a_traceback(graph_file, capsys, opt):
  assert main(["compile", str(graph_file), "--opt", opt]) == 1
  err = capsys.readouterr().err
  assert "[opt." in err and "Traceback" not in err


def test_a_node_a_stage_builds_that_the_derivation_refuses_is_a_refusal(graph_file, capsys, monkeypatch):
  """A stage's node whose properties tinyspec.props refuses (planted: callify hands on an
  ADD of shapes that do not broadcast) is the compiler's refusal, exit 1, naming its op
  and rule, never a traceback; compile_graph raises CompileError with that node."""
  from tinyspec.compiler import pipeline, compile_graph, CompileError
  from tinyspec.uop import UOp
  def buffer(n, slot): return UOp("BUFFER", (UOp("VCONST", (), {"values": [n], "dtype": "index"}),), {"slot": slot, "dtype": "float32", "device": "CPU"})
  bad = UOp("ADD", (buffer(3, 0), buffer(5, 1)))
  monkeypatch.setattr(pipeline._callify_pass, "callify", lambda roots: [bad])
  assert main(["compile", str(graph_file)]) == 1
  err = capsys.readouterr().err
  assert "ADD: shapes (3,), (5,) do not broadcast [shape.broadcast]" in err and "Traceback" not in err
  with pytest.raises(CompileError) as e: compile_graph(validate_file(graph_file).graph)
  assert (e.value.rule, e.value.node) == ("shape.broadcast", bad)
