"""Real tinygrad programs that once imported wrong (issue 26), each imported as a user would
(`import_script`, `tinyspec import-tinygrad`): every graph at every level validates and
evaluates to tinygrad's results within the portable bound.

  adam           a buffer assigned twice in one realize: STORE into AFTER(RESHAPE(BUFFER), STORE)
  half_attention float16 on the PYTHON device: the program's PARAMs are uint16 (emulated),
                 the captured inputs must be too (the same bits)
  bf16_mix       an explicit MULACC of exact operands (PYTHON device): the bound must hold the
                 fused and wide results decision mulacc-rounding allows
  cumsum_views   outputs that are offset, strided and transposed views of a realized buffer,
                 and the CPU device's per-thread core_id
  resize_pad, stats

Skipped without tinygrad. tinygrad runs on CPU where clang is installed, else PYTHON; the
PYTHON-only defects run `tinyspec import-tinygrad` with DEV=PYTHON in a child process.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
import numpy as np
import pytest

os.environ.setdefault("DEV", "CPU" if shutil.which("clang") else "PYTHON")
pytest.importorskip("tinygrad")

from tinyspec.interop.script import import_script   # noqa: E402

PROGRAMS = Path(__file__).resolve().parents[2] / "interop" / "programs"
DEVICE = os.environ["DEV"].split(":")[0]
# (program, graph, device) -> the documented tinygrad bug (docs/tinygrad-bugs.md) that must still show there
KNOWN = {("cumsum_views", "r1.k0.program", "CPU"): "c-renderer-reassociates"}


def _check_all(program: str):
  res = import_script(PROGRAMS / f"{program}.py")
  assert res.error is None, res.error
  assert {"tensor", "kernel", "program"} <= {g.level for g in res.graphs}
  for g in res.graphs:
    assert g.valid, f"{g.name}: {[d.format() for d in g.diagnostics]}"
    assert g.expected and not g.unread, f"{g.name}: tinygrad's results not all read ({g.unread})"
    assert "no error bound" not in g.evaluation, f"{g.name}: {g.evaluation}"
    if (program, g.name, DEVICE) in KNOWN:
      assert not g.eval_ok, f"{g.name}: tinygrad bug {KNOWN[program, g.name, DEVICE]} no longer shows"
      continue
    assert g.eval_ok, f"{g.name}: {g.evaluation}"
  return res


@pytest.mark.parametrize("program", ["adam", "half_attention", "bf16_mix", "cumsum_views", "resize_pad", "stats"])
def test_real_program_imports_validates_and_evaluates(program):
  _check_all(program)


def test_a_buffer_assigned_twice_stores_through_after():
  """Adam's m and v: zeros, then assigned, in one realize. tinygrad's second STORE targets
  AFTER(RESHAPE(BUFFER), STORE); the import stores into AFTER(BUFFER, STORE) with the value
  reshaped, and reads of the state see both assigns in order."""
  res = _check_all("adam")
  assert res.report.forms["assign into a view (RESHAPE) after an assign"] >= 2
  t = next(g for g in res.graphs if g.level == "tensor" and any(n.op == "STORE" for n in g.graph.nodes)
           and any(n.op == "AFTER" and g.graph.nodes[n.src[0]].op == "AFTER" for n in g.graph.nodes))
  stores = [n for n in t.graph.nodes if n.op == "STORE"]
  assert any(t.graph.nodes[n.src[0]].op == "AFTER" for n in stores)
  assert t.eval_ok and "exact" in t.evaluation or "ulp" in t.evaluation


def test_views_of_a_realized_buffer_are_read():
  """c[10:20] (an offset view tinygrad opens lazily), c[::7], c.T and a slice of a reshape:
  each realize's output is tinygrad's value, compared like any other."""
  res = _check_all("cumsum_views")
  tensors = [g for g in res.graphs if g.level == "tensor"]
  assert len(tensors) == 6 and all(set(g.expected) == {"out0"} for g in tensors)
  assert [g.expected["out0"].shape for g in tensors[2:]] == [(10,), (143,), (25, 40), (2, 25)]


def test_an_output_that_cannot_be_read_is_said_loudly(monkeypatch):
  """Where tinygrad's value of an output cannot be read, the graph is not passed silently:
  its evaluation says which output went unchecked and the script is not ok."""
  import tinyspec.interop.capture as cap
  real = cap._tensor_value
  monkeypatch.setattr(cap, "_tensor_value", lambda t: None if t.shape == (10,) else real(t))
  res = import_script(PROGRAMS / "cumsum_views.py", programs=False)
  g = next(g for g in res.graphs if g.name == "r2.tensor")
  assert g.unread == ["out0"] and g.evaluation.startswith("unchecked: tinygrad's out0 could not be read")
  assert not g.eval_ok and not res.ok


def _import_on_python(program: str, out: Path) -> subprocess.CompletedProcess:
  env = {**os.environ, "DEV": "PYTHON"}
  env.pop("TINYSPEC_TINYGRAD_DEVICE", None)
  return subprocess.run([sys.executable, "-m", "tinyspec.cli", "import-tinygrad", str(PROGRAMS / f"{program}.py"), "--out", str(out)],
                        capture_output=True, text=True, env=env, timeout=600)


def test_emulated_half_inputs_have_the_programs_dtypes(tmp_path):
  """On the PYTHON device float16 is stored as uint16: each lowered program's inputs and
  results are written as uint16 (the same bits as tinygrad's float16), so `tinyspec eval`
  takes them as they are and gives tinygrad's bits."""
  p = _import_on_python("half_attention", tmp_path)
  assert p.returncode == 0, p.stdout + p.stderr
  progs = sorted(tmp_path.glob("r*.program.json"))
  assert progs
  for f in progs:
    g = json.loads(f.read_text())
    params = {f"param{n['arg']['slot']}": n["arg"]["dtype"] for n in g["nodes"] if n["op"] == "PARAM" and "name" not in n["arg"]}
    inputs = np.load(f.with_name(f.name.replace(".json", ".inputs.npz")))
    assert "uint16" in params.values()
    assert {k: str(inputs[k].dtype) for k in inputs.files} == {k: params[k] for k in inputs.files}
  f = progs[0]
  out = tmp_path / "eval"
  e = subprocess.run([sys.executable, "-m", "tinyspec.cli", "eval", str(f), "--input", str(f.with_name(f.name.replace(".json", ".inputs.npz"))),
                      "--out", str(out)], capture_output=True, text=True, timeout=600)
  assert e.returncode == 0, e.stderr
  written = sorted(out.glob("*.npy"))
  assert written
  for got_file in written:   # the buffers the program stores into
    got, want = np.load(got_file), np.load(f.with_name(f.name.replace(".json", f".{got_file.name}")))
    assert got.dtype == np.uint16 and np.array_equal(got, want)


def test_explicit_mulacc_is_judged_within_its_allowed_results(tmp_path):
  """bfloat16 a*b + c on the PYTHON device: a MULACC of exact (loaded) operands, computed
  wide (in Python floats, rounded once). Its bound holds the fused and wide results."""
  p = _import_on_python("bf16_mix", tmp_path)
  assert p.returncode == 0, p.stdout + p.stderr
  assert any("MULACC" in f.read_text() for f in tmp_path.glob("r*.program.json"))
